"""The drain steps (spillway.act.drain) on the Kubernetes API emulator and a fake Auto Scaling."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakes import FakeCloud, FakeLedger

from spillway.act.drain import (
    ARRIVED,
    CANCELLED_KEYS,
    COUNTED_EXPIRES_AT,
    DRAIN_COUNTED_KEPT,
    DRAIN_COUNTED_PARTITION,
    OUTCOME_OF_ERROR,
    RAISES,
    UNNAMED,
    DaemonSetEviction,
    Drainer,
    cause_message,
    classify,
    parse_request,
    run_action,
    summarize,
)
from spillway.act.interrupt import InterruptSettings, Notice, drain_plan, execution_name
from spillway.act.planning import AFTER_POLL_SECONDS
from spillway.adapters.kube import KubeClient
from spillway.errors import (
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    DrainCancelled,
    DrainSuperseded,
    DrainTimeout,
    InstanceNotFound,
    InvalidDrainRequest,
    KubeAuthError,
    KubeUnavailable,
    SpillwayError,
)
from spillway.local import objects
from spillway.local.kubeapi import KubeApiServer
from spillway.model.cluster import NodeInfo
from spillway.model.drain import MAX_EXECUTION_SECONDS, MAX_WAITING_EXECUTION_SECONDS, Drain
from spillway.model.k8s import ENABLE_DS_EVICTION, Node, Pod

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "prod"
EXECUTION = {"execution.$": "$$.Execution.Id"}  # every record step names its execution: one count a drain
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
NODE, SPARE = "ip-10-0-1-10.ec2.internal", "ip-10-0-1-11.ec2.internal"
INSTANCE, SPARE_INSTANCE = "i-0a1b2c3d4e5f60718", "i-0a1b2c3d4e5f60719"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Rig:
    api: KubeApiServer
    kube: KubeClient
    cloud: FakeCloud
    clock: Clock
    drainer: Drainer
    outcomes: list[tuple[str, str | None]]

    def node(self, name: str = NODE) -> dict[str, Any]:
        found = self.api.get("Node", name)
        assert found is not None
        return found

    def pod(self, name: str, *, node: str = NODE, app: str = "web", bare: bool = False, **kw: Any) -> None:
        owner = None if bare else ("ReplicaSet", f"{app}-5d9c")
        self.api.add(objects.pod(name, "team-a", node_name=node, labels={"app": app}, owner=owner, **kw))

    def writes(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.api.requests if r.method in WRITES]

    def validated(self, **request: Any) -> Drain:
        out = self.drainer.validate({"cluster": CLUSTER, "node": NODE, **request})
        return Drain.model_validate(out["drain"])

    def cordoned(self, **request: Any) -> Drain:
        drain = self.validated(**request)
        self.drainer.cordon(drain)
        return drain


@pytest.fixture
def rig() -> Iterator[Rig]:
    clock = Clock()  # the drain's clock is the API server's: the kubelet confirms evictions on it
    with KubeApiServer(clock=clock) as api:
        kube = KubeClient.for_url(api.url, max_attempts=1, sleep=lambda _: None)
        cloud = FakeCloud()
        cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], desired=2)
        for name, instance in ((NODE, INSTANCE), (SPARE, SPARE_INSTANCE)):
            api.add(
                objects.node(
                    name,
                    instance=instance,
                    zone="us-east-1a",
                    taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                )
            )
        outcomes: list[tuple[str, str | None]] = []
        drainer = Drainer(
            kube,
            cloud,
            ledger=FakeLedger(),
            cluster=CLUSTER,
            regions=["us-east-1", "us-west-2"],
            clock=clock,
            on_outcome=lambda outcome, who: outcomes.append((outcome, (who or {}).get("node"))),
        )
        api.clear_requests()
        yield Rig(api, kube, cloud, clock, drainer, outcomes)
        kube.close()


# --- the request -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"cluster": CLUSTER}, "node", "required (the name of the Node to drain"),
        ({"cluster": CLUSTER, "node": ""}, "node", "at least 1 character"),
        ({"cluster": CLUSTER, "node": NODE, "deadline_seconds": -5}, "deadline_seconds", "got -5"),
        ({"cluster": CLUSTER, "node": NODE, "deadline_seconds": "900"}, "deadline_seconds", 'got "900"'),
        ({"cluster": CLUSTER, "node": NODE, "poll_seconds": 1.5}, "poll_seconds", "valid integer"),
        ({"cluster": CLUSTER, "node": NODE, "force": "yes"}, "force", "valid boolean"),
        ({"cluster": CLUSTER, "node": NODE, "dry_run": 1}, "dry_run", "valid boolean"),
        ({"cluster": CLUSTER, "node": NODE, "deadline": 60}, "deadline", "not a field of a drain request"),
        ({"node": NODE}, "cluster", "required"),
        ({"cluster": CLUSTER, "node": NODE, "poll_seconds": 0, "deadline_seconds": 900}, "poll_seconds", "up to 60"),
        ({"cluster": CLUSTER, "node": NODE, "poll_seconds": 1, "deadline_seconds": 86_400}, "poll_seconds",
         "more than 800 rounds"),
        # 900 rounds: each may come back from the terminate step (25 events), 22,500 events in all
        ({"cluster": CLUSTER, "node": NODE, "poll_seconds": 1, "deadline_seconds": 900}, "poll_seconds",
         "more than 800 rounds"),
    ],
)  # fmt: skip
def test_a_malformed_request_is_refused_naming_the_field(raw: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        parse_request(raw)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "node", ["..", ".", "Ip-10-0-1-10.ec2.internal", f"{NODE}\n", "team-a/web", f"{NODE}."]
)
def test_a_node_name_kubernetes_would_refuse_is_refused_before_the_api_is_asked(rig: Rig, node: str) -> None:
    """Kubernetes validates a Node's name as a DNS subdomain (ValidateNodeName = NameIsDNSSubdomain), so
    no other name names a Node. ".." was sent as a path segment: the client resolved
    /api/v1/nodes/.. to /api/v1/, and the drain failed with a KubeError about an unexpected object
    instead of naming the field. (Found by fuzzing the drain input.)"""
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate({"cluster": CLUSTER, "node": node}, "by-hand")
    assert caught.value.field == "node" and "DNS subdomain" in str(caught.value)
    assert rig.api.requests == [] and rig.cloud.calls == []


def test_a_drain_naming_pods_without_consolidation_is_refused_and_touches_nothing(rig: Rig) -> None:
    """``pods`` confines a drain to the pods it names only with ``consolidation: true`` (the others are
    left running); without it the names were ignored, and a drain by hand meant for two pods evicted
    every pod of the node and terminated it. Spillway's own plans send ``pods`` only with it
    (spillway.act.planning.drain_item), so the request is a person's mistake: refused, naming ``pods``."""
    request = {"cluster": CLUSTER, "node": NODE, "pods": ["team-a/web-0", "team-a/web-1"]}
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate(request, "by-hand")
    assert caught.value.field == "pods" and "consolidation" in str(caught.value)
    assert rig.api.requests == [] and rig.cloud.calls == []
    assert rig.drainer.validate({**request, "consolidation": True}, "by-hand")  # as meant: accepted


def test_every_bad_field_is_named_at_once() -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        parse_request({"cluster": CLUSTER, "node": NODE, "force": "yes", "deadline_seconds": -1})
    assert "deadline_seconds:" in str(caught.value) and "force:" in str(caught.value)


def test_a_request_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidDrainRequest, match="JSON object"):
        parse_request(["prod", NODE])


@pytest.mark.parametrize("action", [["cordon"], {"name": "cordon"}, None, 3])
def test_an_action_that_is_no_name_is_refused_naming_the_field_and_nothing_is_touched(
    rig: Rig, action: Any
) -> None:
    """A drain step invoked by hand with ``"action": ["cordon"]`` crashed with TypeError (unhashable
    type) instead of the InvalidDrainRequest naming ``action`` that every other bad step input gets."""
    with pytest.raises(InvalidDrainRequest) as caught:
        run_action(rig.drainer, {"action": action, "drain": {}})
    assert caught.value.field == "action", str(caught.value)
    assert rig.writes() == [] and rig.cloud.calls == []


def test_defaults_and_the_parent_execution_marker() -> None:
    request = parse_request(
        {"cluster": CLUSTER, "node": NODE, "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID": "x"}
    )
    assert (request.deadline_seconds, request.poll_seconds) == (900, 15)
    assert (request.terminate, request.force, request.dry_run) == (True, False, False)


# --- pods --------------------------------------------------------------------------------------


def _pod(**kw: Any) -> Pod:
    annotations = kw.pop("annotations", None)
    raw = objects.pod("p", "team-a", node_name=NODE, annotations=annotations, **kw)
    return Pod.model_validate(raw)


@pytest.mark.parametrize(
    ("pod", "force", "action"),
    [
        (_pod(owner=("ReplicaSet", "web")), False, "evict"),
        (_pod(owner=("Job", "train")), False, "evict"),
        (Pod.model_validate(objects.daemonset_pod("ds", NODE)), False, "ignore"),
        (_pod(annotations={"kubernetes.io/config.mirror": "abc"}, owner=None), False, "ignore"),
        (_pod(phase="Succeeded"), False, "ignore"),
        (_pod(phase="Failed"), False, "ignore"),
        (_pod(annotations={"karpenter.sh/do-not-disrupt": "true"}), False, "keep"),
        (_pod(annotations={"karpenter.sh/do-not-disrupt": "true"}), True, "evict"),
        (_pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), False, "keep"),
        (_pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), True, "evict"),
        (_pod(owner=None), False, "keep"),
        (_pod(owner=None), True, "evict"),
        (_pod(owner=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}), False, "evict"),
    ],
    ids=[
        "replicaset", "job", "daemonset", "mirror", "succeeded", "failed", "do-not-disrupt",
        "do-not-disrupt-forced", "not-safe-to-evict", "not-safe-to-evict-forced", "bare", "bare-forced",
        "bare-safe-to-evict",
    ],
)  # fmt: skip
def test_which_pods_a_drain_evicts(pod: Pod, force: bool, action: str) -> None:
    assert classify(pod, force=force).action == action


def test_a_terminating_pod_is_waited_for() -> None:
    raw = objects.pod("p", "team-a", node_name=NODE)
    raw["metadata"]["deletionTimestamp"] = "2026-11-02T10:00:00Z"
    assert classify(Pod.model_validate(raw), force=False).action == "wait"


# --- validate ----------------------------------------------------------------------------------


def test_validate_reads_only_and_says_what_the_drain_would_do(rig: Rig) -> None:
    rig.api.add(objects.daemonset_pod("aws-node-x", NODE))
    rig.pod("web-1", priority=100)
    rig.pod("web-0")
    rig.pod("solo", bare=True)
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "reason": "idle", "deadline_seconds": 60})

    drain = Drain.model_validate(out["drain"])
    assert (drain.instance_id, drain.group, drain.region) == (INSTANCE, "general", "us-east-1")
    assert drain.deadline_at == "2026-11-02T10:01:00Z"
    preview = out["preview"]
    assert preview["would_evict"] == ["team-a/web-0", "team-a/web-1"]  # lowest priority first
    assert [k["pod"] for k in preview["would_keep"]] == ["team-a/solo"]
    assert preview["would_time_out"] is True
    assert preview["would_terminate"]["desired_capacity"] == {"from": 2, "to": 1}
    assert rig.writes() == []
    assert rig.outcomes == []  # only a dry run is an outcome at validation


def _other_cluster(rig: Rig) -> dict[str, Any]:
    return {"cluster": "staging"}


def _unknown_node(rig: Rig) -> dict[str, Any]:
    return {"node": "ip-10-0-9-9.ec2.internal"}


def _not_ec2(rig: Rig) -> dict[str, Any]:
    node = rig.node()
    node["spec"]["providerID"] = "kind://docker/kind/kind-worker"
    rig.api.update("Node", node)
    return {}


def _unmanaged_group(rig: Rig) -> dict[str, Any]:
    rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], tagged=False)
    return {}


def _other_clusters_group(rig: Rig) -> dict[str, Any]:
    rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], cluster="staging")
    return {}


def _no_group(rig: Rig) -> dict[str, Any]:
    rig.cloud.groups.clear()
    return {}


def _unmanaged_region(rig: Rig) -> dict[str, Any]:
    node = rig.node()
    node["metadata"]["labels"]["topology.kubernetes.io/region"] = "eu-west-1"
    rig.api.update("Node", node)
    return {}


def _cordoned_by_somebody(rig: Rig) -> dict[str, Any]:
    node = rig.node()
    node["spec"]["unschedulable"] = True
    rig.api.update("Node", node)
    return {}


def _scale_down_disabled(rig: Rig) -> dict[str, Any]:
    node = rig.node()
    node["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = "true"
    rig.api.update("Node", node)
    return {}


def _node_do_not_disrupt(rig: Rig) -> dict[str, Any]:
    node = rig.node()
    node["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    rig.api.update("Node", node)
    return {}


def _at_min_size(rig: Rig) -> dict[str, Any]:
    rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], min_size=2, desired=2)
    return {}


def _terminate_suspended(rig: Rig) -> dict[str, Any]:
    rig.cloud.groups[("us-east-1", "general")]["SuspendedProcesses"] = [{"ProcessName": "Terminate"}]
    return {}


def _protected_since(rig: Rig) -> dict[str, Any]:
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["ProtectedFromScaleIn"] = True
    return {}


def _planned_instance_changed(rig: Rig) -> dict[str, Any]:
    return {"instance_id": "i-0ffffffffffffffff"}


def _planned_group_changed(rig: Rig) -> dict[str, Any]:
    return {"group": "gpu"}


def _terminating(rig: Rig) -> dict[str, Any]:
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = "Terminating:Wait"
    return {}


@pytest.mark.parametrize(
    ("setup", "field", "words"),
    [
        (_other_cluster, "cluster", "manages cluster 'prod', not 'staging'"),
        (_unknown_node, "node", "no Node named 'ip-10-0-9-9.ec2.internal'"),
        (_not_ec2, "node", "is not an EC2 instance"),
        (_unmanaged_group, "node", "not tagged for cluster 'prod'"),
        (_other_clusters_group, "node", "k8s.io/cluster-autoscaler/prod"),
        (_no_group, "node", "in no Auto Scaling group in us-east-1"),
        (_unmanaged_region, "node", "eu-west-1, a region this Spillway does not manage"),
        (_cordoned_by_somebody, "node", "cordoned by somebody else"),
        (_scale_down_disabled, "node", '"force": true'),
        (_at_min_size, "node", "minimum size (MinSize 2, desired 2)"),
        (_terminate_suspended, "node", "Terminate process suspended"),
        (_planned_instance_changed, "instance_id", f"is instance {INSTANCE} now"),
        (_planned_group_changed, "group", "not 'gpu' as requested"),
        (_terminating, "node", "Terminating:Wait"),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_validate_refuses_what_it_must_not_drain_and_touches_nothing(
    rig: Rig, setup: Any, field: str, words: str
) -> None:
    request = {"cluster": CLUSTER, "node": NODE, **setup(rig)}
    rig.api.clear_requests()
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate(request)
    assert caught.value.field == field
    assert words in str(caught.value), str(caught.value)
    assert rig.writes() == []


@pytest.mark.parametrize("state", ["EnteringStandby", "Standby", "Detaching", "Warmed:Running"])
def test_validate_refuses_an_instance_out_of_its_groups_service(rig: Rig, state: str) -> None:
    """Amazon EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling instance lifecycle" and "Temporarily
    remove instances from your Auto Scaling group": an instance leaves service for Standby through
    EnteringStandby (its desired capacity decremented by default, so the group launches no replacement),
    a warm pool's instances (Warmed:*) are outside the group's capacity and
    TerminateInstanceInAutoScalingGroup "cannot be called on instances in a warm pool" (API reference).
    Only Terminating*, Detach* and Standby were refused: a drain of an instance entering standby went on
    to terminate it with a second decrement. Only live instances (Pending*, InService) are drained."""
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = state
    rig.api.clear_requests()
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate({"cluster": CLUSTER, "node": NODE})
    assert caught.value.field == "node" and state in str(caught.value)
    assert rig.writes() == []


@pytest.mark.parametrize("state", ["EnteringStandby", "Standby", "Detaching"])
def test_an_instance_leaving_anyway_out_of_its_groups_service_is_drained_not_terminated(
    rig: Rig, state: str
) -> None:
    """A Spot warning (or a scheduled change) for an instance a person put in Standby, or is detaching:
    it is out of its group's service but still a Node, and EC2 takes it in two minutes whatever its
    group does. aws-node-termination-handler cordons and drains the node of any interruption notice;
    the drain was refused, and its pods died with the instance. It is drained, and never terminated
    through its group (Standby took it out of the desired capacity already; a detaching instance is
    leaving it). Terminating*, and a warm pool's instances (which Spot never launches: a group with a
    warm pool launches no Spot), are still refused: the group itself terminates the former."""
    rig.pod("web-0")
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = state

    drain = rig.validated(force=True, leaving=True)
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)

    assert drain.leaving and drain.terminate is False and first["evicted"] == ["team-a/web-0"]
    with pytest.raises(InvalidDrainRequest, match=state):
        rig.validated(force=True)  # by hand, or by a plan: still nothing to drain


@pytest.mark.parametrize("state", ["Terminating", "Terminating:Wait", "Terminating:Proceed"])
def test_a_spot_warnings_drain_of_an_instance_its_group_terminates_evicts_its_pods(
    rig: Rig, state: str
) -> None:
    """The Spot warning's forced drain of an instance its group is terminating already (Capacity
    Rebalancing may take it out of service as the warning comes; the hook holding it may not be
    Spillway's): its pods still run and EC2 takes it in two minutes. The drain was refused, then
    cancelled as having nothing to drain (review of the notice change), and the pods died with the
    instance. They are evicted, and the instance is left to its group. Advice (a rebalance
    recommendation, without force) still leaves it to the group, and a drain without force by hand is
    refused."""
    rig.pod("web-0")
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = state

    drain = rig.validated(**_notice_drain("interruption"))
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)

    assert drain.terminate is False and first["evicted"] == ["team-a/web-0"]
    assert "nothing to drain" in cancelled(rig.drainer.validate(_notice_drain("rebalance")))["note"]
    with pytest.raises(InvalidDrainRequest, match=state):
        rig.validated(leaving=True)


def test_an_instance_leaving_anyway_that_its_group_keeps_warm_is_not_drained(rig: Rig) -> None:
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = "Warmed:Running"
    with pytest.raises(InvalidDrainRequest, match="Warmed:Running"):
        rig.validated(force=True, leaving=True)


PLAN = "20261102T100000Z-abc"
# The world changed since the plan: its premise is gone, nothing was touched, the next plan judges again.
STALE = [
    (_unknown_node, "no Node named 'ip-10-0-9-9.ec2.internal'"),  # gone since the plan
    (_planned_instance_changed, f"is instance {INSTANCE} now"),  # replaced: a new instance, a new uid
    (_no_group, "in no Auto Scaling group in us-east-1"),  # its instance left its group
    (_planned_group_changed, "not 'gpu' as requested"),  # ... for another
    (_terminating, "Terminating:Wait"),
    (_cordoned_by_somebody, "cordoned by somebody else"),
    (_scale_down_disabled, '"force": true'),
    (_node_do_not_disrupt, "karpenter.sh/do-not-disrupt=true"),  # a node-level do-not-disrupt (audit)
    (_at_min_size, "minimum size (MinSize 2, desired 2)"),
    (_terminate_suspended, "Terminate process suspended"),  # the group would not terminate it (review r24)
]


def test_scale_in_protection_stops_only_a_plans_drain_that_terminates(rig: Rig) -> None:
    """TerminateInstanceInAutoScalingGroup ignores scale-in protection (EC2 Auto Scaling User Guide, "Use
    instance scale-in protection"), so the planner keeps a node protected on its own (code
    ``scale-in-protected``); one protected between the plan and its drain was terminated all the same.
    A person's drain, one that keeps the node, and one whose group protects every instance it launches
    (the protection then says nothing of this node) go on."""
    _protected_since(rig)
    rig.api.clear_requests()
    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "plan_id": PLAN, "reason": "idle 12 min"})
    assert "protected from scale-in" in cancelled(out)["note"] and rig.writes() == []

    assert rig.validated().terminate is True  # by hand: the person asked for this node
    assert rig.validated(**_notice_drain("interruption")).terminate is True  # EC2 takes it anyway
    assert rig.validated(plan_id=PLAN, terminate=False).terminate is False
    rig.cloud.groups[("us-east-1", "general")]["NewInstancesProtectedFromScaleIn"] = True
    assert rig.validated(plan_id=PLAN, reason="idle 12 min").terminate is True


def _other_region(rig: Rig) -> dict[str, Any]:
    return {"region": "us-west-2"}


def _forced_consolidation(rig: Rig) -> dict[str, Any]:
    return {"consolidation": True, "pods": ["team-a/web-0"], "force": True}


@pytest.mark.parametrize(
    ("setup", "words"), STALE, ids=lambda v: v.__name__.strip("_") if callable(v) else None
)
def test_a_plans_drain_whose_premise_changed_is_cancelled_touching_nothing(
    rig: Rig, setup: Any, words: str
) -> None:
    """A refusal that for a plan's drain only means the world changed since the plan (its node gone or
    replaced, its instance out of its group or terminating, cordoned by somebody, scale-down disabled,
    its group at MinSize) cancels it, as a lapsed claim does: an answer, not an error (no alarm)."""
    request = {"cluster": CLUSTER, "node": NODE, "plan_id": PLAN, "reason": "idle 12 min", **setup(rig)}
    rig.api.clear_requests()

    out = rig.drainer.validate(request)

    note = cancelled(out)["note"]
    assert words in note and not note.startswith(("node:", "group:", "instance_id:")), note
    assert cancelled(out) | {"note": ""} == {
        "node": request["node"], "instance_id": request.get("instance_id"), "group": request.get("group"),
        "region": None, "plan_id": PLAN, "reason": "idle 12 min", "note": ""}  # fmt: skip
    assert rig.writes() == [] and rig.outcomes == []  # counted once, by the record step


@pytest.mark.parametrize(
    ("setup", "words"), STALE, ids=lambda v: v.__name__.strip("_") if callable(v) else None
)
def test_the_same_refusals_of_a_drain_started_by_hand_are_rejected(rig: Rig, setup: Any, words: str) -> None:
    """A person asked: they hear why it failed (the execution fails with InvalidDrainRequest)."""
    request = {"cluster": CLUSTER, "node": NODE, **setup(rig)}
    with pytest.raises(InvalidDrainRequest, match=re.escape(words)):
        rig.drainer.validate(request)
    assert rig.writes() == []


# What a notice's drain (``leaving``) is still refused for: its operator protected the node, or the node
# or its instance changed since the snapshot the interrupt function read. (Somebody's cordon, MinSize
# and a suspended Terminate give way to an instance leaving anyway.)
NOTICE_STALE = [s for s in STALE if s[0] not in (_cordoned_by_somebody, _at_min_size, _terminate_suspended)]
PROTECTIONS = [s for s in STALE if s[0] in (_scale_down_disabled, _node_do_not_disrupt)]


def _notice_drain(notice: str, **request: Any) -> dict[str, Any]:
    """A drain as the interrupt function writes it for ``notice`` (``force`` only a Spot warning's)."""
    force = notice == "interruption"
    return {"cluster": CLUSTER, "node": NODE, "instance_id": INSTANCE, "reason": f"{notice} notice n-1",
            "leaving": True, "force": force, "notice": notice, **request}  # fmt: skip


@pytest.mark.parametrize("notice", ["rebalance", "scheduled"])
@pytest.mark.parametrize(
    ("setup", "words"),
    [*NOTICE_STALE, (_protected_since, "protected from scale-in")],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_a_notices_drain_without_force_the_node_refuses_is_cancelled_touching_nothing(
    rig: Rig, setup: Any, words: str, notice: str
) -> None:
    """A rebalance recommendation (or a scheduled change more than a day out) is advice: a node its
    operator annotated do-not-disrupt or scale-down-disabled, or whose instance they protected from
    scale-in, is left alone, as Karpenter never disrupts such a node voluntarily. The drain was raised: a failed execution and the drain-node failures alarm
    for a node deliberately protected. Cancelled as a plan's drain is: an answer, not an error."""
    request = _notice_drain(notice, **setup(rig))
    rig.api.clear_requests()

    note = cancelled(rig.drainer.validate(request))["note"]

    assert words in note and f"the {notice} notice's drain" in note, note
    assert rig.writes() == [] and rig.outcomes == []


@pytest.mark.parametrize(
    ("setup", "words"),
    [s for s in NOTICE_STALE if s not in PROTECTIONS and s[0] not in (_terminating, _planned_group_changed)],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_a_spot_warnings_drain_of_a_node_gone_or_changed_is_cancelled_too(
    rig: Rig, setup: Any, words: str
) -> None:
    """The Spot warning's drain (forced) is refused only when the node or its instance changed since the
    snapshot (gone, replaced, out of its group): nothing to drain, no alarm (one its group terminates is
    drained: test_a_spot_warnings_drain_of_an_instance_its_group_terminates_evicts_its_pods; one moved to
    another of the cluster's groups too: test_a_spot_warnings_drain_of_an_instance_moved_to_another_...).
    The Node gets the Event when it is still the notice's instance's, never a Node of another instance by
    that name."""
    request = _notice_drain("interruption", **setup(rig))
    state = rig.drainer.validate(request)
    assert words in cancelled(state)["note"]

    rig.drainer.record(state, "cancelled")
    reasons = [e["reason"] for e in rig.api.list("Event")]
    assert reasons == (
        [] if setup in (_unknown_node, _planned_instance_changed) else ["SpillwayDrainSkipped"]
    )


@pytest.mark.parametrize(
    ("setup", "words"), PROTECTIONS, ids=lambda v: v.__name__.strip("_") if callable(v) else None
)
def test_a_protected_node_is_skipped_on_advice_visibly_and_drained_on_a_spot_warning(
    rig: Rig, setup: Any, words: str
) -> None:
    """The skipped drain succeeds ``cancelled``, counted once in DrainOutcome, and says so on the Node (a
    ``SpillwayDrainSkipped`` Event: the operator sees why it was not drained). The Spot warning that may
    follow drains it whatever the annotation says (EC2 takes it in two minutes), and a person's drain
    without force is still refused, naming the field."""
    setup(rig)
    rig.pod("web-0")
    state = rig.drainer.validate(_notice_drain("rebalance"))

    out = run_action(rig.drainer, {"action": "record", "outcome": "cancelled", "state": state})

    assert (out["outcome"], out["node"], out["reason"]) == ("cancelled", NODE, "rebalance notice n-1")
    assert rig.outcomes == [("cancelled", NODE)] and "error" not in out
    [event] = [e for e in rig.api.list("Event") if e["involvedObject"]["name"] == NODE]
    assert (event["reason"], event["type"]) == ("SpillwayDrainSkipped", "Normal")
    assert words in event["message"] and "rebalance notice n-1" in event["message"]
    assert rig.node()["spec"].get("unschedulable") is not True  # not cordoned

    warned = rig.validated(**_notice_drain("interruption"))
    assert warned.force and warned.leaving
    with pytest.raises(InvalidDrainRequest, match=re.escape(words)) as caught:
        rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "reason": "by hand"})
    assert caught.value.field == "node"


# Auto Scaling calls that change a group or act on its instances: a drain of an instance in no group
# makes none (it reads the group it names and that group's activities, nothing more).
GROUP_WRITES = ("terminate_instance", "set_desired_capacity", "describe_lifecycle_hooks",
                "complete_lifecycle_action", "record_heartbeat", "attach_instances")  # fmt: skip


def _detached(rig: Rig, state: str = "running", *, recorded: bool = True) -> None:
    """The instance left its group since the interrupt function's snapshot (DetachInstances by a person
    or a tool): no group lists it, EC2 still runs it (``state``), its Node is still there, and the
    group's scaling activities record the detach (``recorded``), as AWS does."""
    raw = rig.cloud.groups[("us-east-1", "general")]
    raw["Instances"] = [i for i in raw["Instances"] if i["InstanceId"] != INSTANCE]
    raw["DesiredCapacity"] -= 1
    rig.cloud.ec2[INSTANCE] = {"region": "us-east-1", "state": state, "tags": {}}
    if recorded:
        rig.cloud.activities[("us-east-1", "general")] = [{
            "ActivityId": "5e8c3a1b-6f0d-4b2a-9c7e-1d2f3a4b5c6d", "AutoScalingGroupName": "general",
            "Description": f"Detaching EC2 instance: {INSTANCE}",
            "Cause": f"At 2026-11-02T09:59:30Z instance {INSTANCE} was detached in response to a user request, "
                     "shrinking the capacity from 2 to 1.",
            "StartTime": "2026-11-02T09:59:30Z", "EndTime": "2026-11-02T09:59:31Z", "StatusCode": "Successful",
        }]  # fmt: skip


def test_a_spot_warnings_drain_of_an_instance_detached_from_its_group_evicts_and_terminates_nothing(
    rig: Rig,
) -> None:
    """EC2 reclaims a Spot instance two minutes after the warning whether or not it is in a group, so a
    Node whose instance was detached since the snapshot still runs pods that die with it. The forced
    drain was cancelled ("nothing to drain") and they died without a graceful eviction;
    aws-node-termination-handler cordons and drains any such node. It is cordoned and its pods evicted,
    and it is never terminated (there is no group to decrement; EC2 takes it back): Auto Scaling is only
    read (the group the request names, and its activities, which show the detach). The output and the
    Node's Event say why."""
    rig.pod("web-0")
    _detached(rig)
    rig.cloud.calls.clear()

    drain = rig.validated(**_notice_drain("interruption", group="general"))
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)
    rig.api.delete("Pod", "web-0", "team-a")  # its kubelet confirms the eviction
    second = rig.drainer.evict(drain, first)
    ready = rig.drainer.check(drain)
    out = rig.drainer.record({"drain": drain.model_dump(), "round": second}, "drained")

    assert drain.terminate is False and drain.group is None and drain.leaving and drain.force
    assert first["evicted"] == ["team-a/web-0"] and second["done"] and ready["ready"]
    assert out["outcome"] == "drained" and out["outside_group"] is True and out["group"] is None
    assert "in no Auto Scaling group" in out["note"] and "not terminated" in out["note"], out
    assert "since the snapshot" in out["note"], out
    assert rig.outcomes == [("drained", NODE)]
    node = rig.node()
    assert node["spec"]["unschedulable"] is True  # stays cordoned: EC2 takes the instance
    assert not [c for c, _ in rig.cloud.calls if c in GROUP_WRITES], rig.cloud.calls
    read = [(c, a) for c, a in rig.cloud.calls if c in ("describe_group", "detach_recorded")]
    assert read == [
        ("describe_group", ("us-east-1", "general")),
        ("detach_recorded", ("us-east-1", "general", INSTANCE)),
    ]
    drained = [e for e in rig.api.list("Event") if e["reason"] == "SpillwayDrained"]
    assert drained and "in no Auto Scaling group" in drained[-1]["message"]
    # a failure's compensation keeps the cordon and the taint, touching no group either
    kept = rig.drainer.uncordon(drain)
    assert kept["uncordoned"] is False and rig.node()["spec"]["unschedulable"] is True
    assert not [c for c, _ in rig.cloud.calls if c in GROUP_WRITES], rig.cloud.calls


def test_a_dry_run_of_a_detached_instances_spot_drain_would_terminate_nothing(rig: Rig) -> None:
    rig.pod("web-0")
    _detached(rig)
    preview = rig.drainer.validate(_notice_drain("interruption", group="general", dry_run=True))["preview"]
    assert preview["would_evict"] == ["team-a/web-0"] and preview["would_terminate"] is None
    assert preview["group"] is None


@pytest.mark.parametrize(
    "request_",
    [_notice_drain("rebalance", group="general"),
     _notice_drain("scheduled", group="general"),  # more than a day out
     _notice_drain("scheduled", group="general", force=True)],  # within a day of the change
    ids=["rebalance", "scheduled", "scheduled-within-a-day"],
)  # fmt: skip
def test_a_notices_drain_but_a_spot_warnings_of_a_detached_instance_is_still_cancelled(
    rig: Rig, request_: dict[str, Any]
) -> None:
    """Advice (a rebalance recommendation, a scheduled change more than a day out) for an instance no
    longer in a group: the instance may stay, and it is no longer Spillway's to drain. A scheduled
    change within a day too: a reboot or a stop leaves the instance running (EC2 does not take it
    back), and the node, emptied and cordoned, would stay so with nothing to terminate."""
    rig.pod("web-0")
    _detached(rig)
    rig.api.clear_requests()
    note = cancelled(rig.drainer.validate(request_))["note"]
    assert "in no Auto Scaling group" in note and rig.writes() == []


@pytest.mark.parametrize("state", ["shutting-down", "terminated", "stopped", None])
def test_a_spot_warnings_drain_of_an_instance_in_no_group_that_ec2_no_longer_runs_is_cancelled(
    rig: Rig, state: str | None
) -> None:
    """No group lists an instance that was terminated either: when EC2 no longer runs it (or no longer
    knows it), its Node has nothing left to drain, as before."""
    _detached(rig, state or "running")
    if state is None:
        del rig.cloud.ec2[INSTANCE]
    rig.api.clear_requests()
    note = cancelled(rig.drainer.validate(_notice_drain("interruption", group="general")))["note"]
    assert "in no Auto Scaling group" in note and "nothing to drain" in note, note
    assert f"EC2: {state or 'unknown'}" in note and rig.writes() == []


@pytest.mark.parametrize(
    ("group", "words"),
    [("general", "no recent scaling activity of 'general' detached it"),  # terminated, not detached
     ("batch", "no recent scaling activity of 'batch' detached it"),  # another group of the cluster
     ("other", "'other' is not managed for cluster 'prod'"),
     ("gone", "'gone' does not exist")],
    ids=["unrecorded", "another-group", "unmanaged", "unknown"],
)  # fmt: skip
def test_a_spot_warnings_drain_of_an_instance_the_named_group_did_not_detach_is_cancelled(
    rig: Rig, group: str, words: str
) -> None:
    """Only a managed group's own record that it detached the instance lets a drain go on outside every
    group: the request alone (anybody may start a DrainNode execution) proves nothing."""
    rig.pod("web-0")
    _detached(rig, recorded=False)
    rig.cloud.add_group("batch", [], desired=0)
    rig.cloud.add_group("other", [], desired=0, cluster="staging")
    rig.api.clear_requests()
    note = cancelled(rig.drainer.validate(_notice_drain("interruption", group=group)))["note"]
    assert "in no Auto Scaling group" in note and words in note, note
    assert rig.writes() == []


def test_a_drain_by_hand_or_a_plans_of_a_detached_instance_is_still_refused(rig: Rig) -> None:
    """Only a Spot warning's forced drain (EC2 takes the instance anyway) drains a node outside every
    group."""
    _detached(rig)
    with pytest.raises(InvalidDrainRequest, match="in no Auto Scaling group"):
        rig.validated(force=True, leaving=True, group="general")  # by hand, even as a leaving instance
    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "plan_id": PLAN, "force": True,
                                "leaving": True, "reason": "idle 12 min"})  # fmt: skip
    assert "in no Auto Scaling group" in cancelled(out)["note"]
    lifecycle = {"hook": "drain-before-terminate", "token": "5f3c2a1b-0d4e-4f6a-9b8c-7d6e5f4a3b2c",
                 "heartbeat_seconds": 300}  # fmt: skip
    with pytest.raises(InvalidDrainRequest, match="in no Auto Scaling group"):
        rig.validated(group="general", lifecycle=lifecycle, force=True, terminate=False)
    assert rig.writes() == []


@pytest.mark.parametrize(
    ("setup", "field", "words"),
    [
        (_other_cluster, "cluster", "manages cluster 'prod', not 'staging'"),
        (_not_ec2, "node", "is not an EC2 instance"),
        (_unmanaged_group, "node", "not tagged for cluster 'prod'"),
        (_other_clusters_group, "node", "k8s.io/cluster-autoscaler/prod"),
        (_unmanaged_region, "node", "eu-west-1, a region this Spillway does not manage"),
        (_other_region, "region", "not us-west-2 as requested"),
        (_forced_consolidation, "force", "never forced"),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_a_plans_drain_that_could_never_have_been_right_is_still_rejected(
    rig: Rig, setup: Any, field: str, words: str
) -> None:
    """Another cluster, a node outside EC2 or outside the groups and regions Spillway manages, a field
    that contradicts the node or another field: a bug or a misconfiguration, which must alarm."""
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "plan_id": PLAN, **setup(rig)})
    assert caught.value.field == field and words in str(caught.value), str(caught.value)


def test_force_drains_a_scale_down_disabled_node_and_terminate_false_ignores_min_size(rig: Rig) -> None:
    _scale_down_disabled(rig)
    assert rig.validated(force=True).force
    _at_min_size(rig)
    assert rig.validated(force=True, terminate=False).terminate is False


def test_an_instance_going_away_is_drained_without_terminating_at_min_size(rig: Rig) -> None:
    """Spot reclaims two instances of one pool: the first drain's terminate took the group to its
    MinSize after the interrupt function read it, so the second drain was refused before it cordoned
    anything, and its pods died with the instance. With ``leaving`` it drains, terminates
    nothing and leaves the instance to EC2 (the group replaces it). (Found by review.)"""
    _at_min_size(rig)

    kept = rig.validated(force=True, leaving=True)
    rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], min_size=1, desired=2)
    room = rig.validated(force=True, leaving=True)

    assert kept.terminate is False and room.terminate is True
    with pytest.raises(InvalidDrainRequest, match="minimum size"):
        _at_min_size(rig)
        rig.validated(force=True)  # a drain by hand is still refused: lower MinSize, or terminate false


@pytest.mark.parametrize(
    ("notice", "force"),
    [("scheduled", False), ("scheduled", True), ("rebalance", False)],
    ids=["scheduled-days-out", "scheduled-last-day", "rebalance"],
)
def test_a_notices_drain_at_min_size_terminates_without_decrementing_so_the_group_replaces_it(
    rig: Rig, notice: str, force: bool
) -> None:
    """A notice whose instance EC2 may not take soon, its group at MinSize (no Capacity Rebalancing): the
    drain emptied the node and, as for a Spot warning, left the instance to EC2. But EC2 acts on a
    retirement announced two weeks ahead only at the event's start, never for a reboot (EC2 user guide,
    "Scheduled events for your instances"), and a rebalance recommendation is advice no interruption
    need follow ("EC2 instance rebalance recommendations"): the node stood cordoned and empty, paid for.
    Nothing reclaims it sooner, so the drain terminates it without decrementing
    (TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity false: the group launches a
    replacement, API reference), its DesiredCapacity kept at MinSize."""
    _at_min_size(rig)
    rig.pod("web-0")
    request = SCHEDULED if notice == "scheduled" else {"leaving": True, "notice": notice}
    drain = rig.cordoned(**{**request, "force": force})
    assert drain.terminate is True
    rig.drainer.evict(drain)
    rig.clock.advance(1)  # the kubelet confirms the eviction: the node is empty, as the check found it

    outcome = _terminate_or_compensate(rig, drain)

    assert rig.cloud.terminated()[-1] == ("us-east-1", INSTANCE, False)
    assert "launches a replacement" in outcome["terminated"]["note"]
    assert rig.cloud.describe_group("us-east-1", "general").DesiredCapacity == 2


def test_with_terminate_suspended_a_drain_keeps_its_node_or_drains_one_leaving_anyway(rig: Rig) -> None:
    """Terminate suspended (EC2 Auto Scaling User Guide, "Considerations for suspending processes"): a
    drain that terminates is refused (above); one with ``"terminate": false`` empties the node and keeps
    it, and an instance leaving anyway (a Spot warning) is still drained. (Review r24.)"""
    _terminate_suspended(rig)

    assert rig.validated(terminate=False).terminate is False
    assert rig.validated(force=True, leaving=True).leaving is True


def test_min_size_counts_the_weight_terminating_a_weighted_instance_takes_off(rig: Rig) -> None:
    """A weighted group's DesiredCapacity and MinSize are units, and terminating an instance with the
    decrement takes its WeightedCapacity off (AWS: asg-instance-weighting.html): desired 4, MinSize 3
    and an instance of weight 2 is at its minimum for that instance, which counting it as one missed
    (AWS then refused the decrement after the pods were evicted)."""
    group = rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], min_size=3, desired=4)
    for instance in group["Instances"]:
        instance["WeightedCapacity"] = "2"

    with pytest.raises(InvalidDrainRequest, match=r"minimum size \(MinSize 3, desired 4\)"):
        rig.validated(force=True)
    assert rig.validated(force=True, leaving=True).terminate is False  # EC2 reclaims it, undecremented
    group["MinSize"] = 2
    assert rig.validated(force=True).terminate is True


def test_an_instance_going_away_is_drained_under_somebody_elses_cordon_and_it_stays(rig: Rig) -> None:
    """A node a person cordoned gets a Spot warning: the drain was refused, so its pods got no graceful
    eviction and died with the instance (a lifecycle action's drain likewise left the instance waiting
    for the hook's whole timeout). A leaving instance's drain evicts under their cordon, never takes it
    over, and its compensation never undoes it. (Found by review.)"""
    rig.pod("web-0")
    _cordoned_by_somebody(rig)

    drain = rig.validated(force=True, leaving=True)
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)
    rig.drainer.uncordon(drain)  # a compensation
    node = rig.node()

    assert drain.leaving and first["evicted"] == ["team-a/web-0"]
    assert (
        node["spec"]["unschedulable"] is True
        and "spillway.io/cordoned" not in node["metadata"]["annotations"]
    )
    with pytest.raises(InvalidDrainRequest, match="cordoned by somebody else"):
        rig.validated(force=True)  # any other drain is still refused


def test_a_leaving_instances_drain_ends_when_its_node_is_gone_and_another_drain_does_not(rig: Rig) -> None:
    """EC2 reclaimed the instance, or another drain of it (the Spot warning's, beside a rebalance
    recommendation's) terminated it and deleted the Node: the leaving drain has nothing left to do, and
    goes on to record the instance terminated instead of failing (a failed execution raises the drain
    alarm). A plan's drain whose Node disappears is still cancelled."""
    rig.pod("web-0")
    leaving = rig.cordoned(leaving=True, deadline_seconds=600)
    planned = rig.validated()
    rig.api.delete("Node", NODE)

    done = rig.drainer.evict(leaving)
    ready = rig.drainer.check(leaving)

    assert (done["done"], done["remaining"], ready["ready"]) == (True, [], True)
    with pytest.raises(DrainCancelled, match="disappeared"):
        rig.drainer.evict(planned)


def test_a_node_spillway_cordoned_before_may_be_drained_again(rig: Rig) -> None:
    rig.kube.cordon(NODE, "planner")
    assert rig.validated().node == NODE


def test_a_dry_run_is_an_outcome(rig: Rig) -> None:
    rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "dry_run": True})
    assert rig.outcomes == [("dry_run", NODE)]


# --- cordon and evict --------------------------------------------------------------------------


def test_cordon_marks_the_node_as_spillways_and_taints_it_keeping_other_taints(rig: Rig) -> None:
    drain = rig.validated(reason="idle 12 min")
    assert rig.drainer.cordon(drain) == {"cordoned": True, "tainted": True, "standing_by": None}
    node = rig.node()
    assert node["spec"]["unschedulable"] is True
    assert "idle 12 min" in node["metadata"]["annotations"]["spillway.io/cordoned"]
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} == {
        ("nvidia.com/gpu", "NoSchedule"),
        ("spillway.io/draining", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),  # the node lifecycle controller's, for the cordon
    }
    events = [e for e in rig.api.list("Event") if e["involvedObject"]["name"] == NODE]
    assert [e["reason"] for e in events] == ["SpillwayDraining"]


def test_a_drain_no_plan_started_holds_its_node_and_the_snapshot_says_so(rig: Rig) -> None:
    """A Spot warning's (or an operator's) drain marks its cordon held: a plan must not uncordon that
    node to reuse its room, which would cancel the drain of an instance EC2 is reclaiming. A plan's own
    drain does not."""
    warned = rig.validated(reason="spot interruption warning e-1", force=True)
    rig.drainer.cordon(warned)
    held = NodeInfo.from_node(Node.model_validate(rig.node()))
    rig.drainer.uncordon(warned)
    planned = rig.validated(reason="idle 12 min", plan_id="20261102T100000Z-abc")
    rig.drainer.cordon(planned)
    ours = NodeInfo.from_node(Node.model_validate(rig.node()))

    assert held.cordoned_by_spillway and held.cordon_held
    assert ours.cordoned_by_spillway and not ours.cordon_held
    assert NodeInfo.from_dict(held.to_dict()).cordon_held  # kept through the stored snapshot


def test_the_latest_drain_holds_the_node_and_a_drain_undoes_only_its_own_cordon(rig: Rig) -> None:
    """AWS may send a rebalance recommendation with the two-minute warning: two drains of one node. The
    recommendation's (no force) met its deadline and its compensation uncordoned the node EC2 was
    reclaiming, under the warning's drain; and a plan's drain that cordoned first kept its words, so the
    node never read as held and the next plan could reuse it. The cordon now names the drain that
    holds the node, and a drain's compensation leaves another's cordon and taint. (Found by review.)"""
    planned = rig.cordoned(reason="idle 12 min", plan_id="20261102T100000Z-abc")
    rig.pod("web-0")
    rebalance = rig.cordoned(reason="rebalance recommendation r-1", leaving=True, deadline_seconds=600)
    warned = rig.cordoned(reason="spot interruption warning w-1", leaving=True, force=True)
    held = NodeInfo.from_node(Node.model_validate(rig.node()))

    for superseded in (planned, rebalance):
        assert "another drain holds the node" in rig.drainer.uncordon(superseded)["note"]
    node = rig.node()
    assert held.cordon_held and node["spec"]["unschedulable"] is True
    assert "spot interruption warning w-1" in node["metadata"]["annotations"]["spillway.io/cordoned"]
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"]["taints"])
    # its own, but a forced drain of a leaving instance keeps it: EC2 takes the instance anyway
    assert rig.drainer.uncordon(warned)["uncordoned"] is False and rig.node()["spec"]["unschedulable"] is True


def test_a_retried_cordon_step_keeps_the_cordon_a_plan_saw(rig: Rig) -> None:
    """Step Functions retries the Cordon step (its Lambda answer lost) a few seconds later. The retry
    writes nothing: the cordon keeps its first time, so a plan that saw it between the two tries still
    names it (its digest) and may reuse the node; before, the retry re-stamped it, and that plan's
    scale-up left the node cordoned."""
    rig.kube._clock = rig.clock  # the cordon's time is the test's
    drain = rig.cordoned(reason="idle 12 min", plan_id="20261102T100000Z-abc")
    seen = NodeInfo.from_node(Node.model_validate(rig.node())).cordon_digest
    rig.clock.advance(7)

    assert rig.drainer.cordon(drain)["cordoned"] is True
    assert NodeInfo.from_node(Node.model_validate(rig.node())).cordon_digest == seen
    assert rig.kube.uncordon(NODE, if_digest=seen) is True


def _warning_right_after_the_next_read(rig: Rig) -> None:
    """A Spot warning's drain cordons and taints the node right after the next read of it (the
    compensation's), before anything the compensation patches."""
    read = rig.kube.get_node
    raced: list[str] = []

    def meanwhile(name: str) -> Node:
        node = read(name)
        if not raced:
            raced.append(name)
            rig.cordoned(reason="spot interruption warning w-1", leaving=True, force=True)
        return node

    rig.kube.get_node = meanwhile  # type: ignore[method-assign]


def test_a_compensation_leaves_a_cordon_another_drain_wrote_after_it_read_the_node(rig: Rig) -> None:
    """The compensation read the Node as its drain's own, then a Spot warning's drain cordoned it
    (before the uncordon's patch). The uncordon took the warning's cordon off by name, and new pods
    could land on a node EC2 was reclaiming. It is compare-and-set: taken off only while the words are
    still the drain's; and the warning's draining taint with it (before, the compensation lifted the
    taint first, whoever's cordon then held the node)."""
    planned = rig.cordoned(reason="idle 12 min", plan_id="20261102T100000Z-abc")
    _warning_right_after_the_next_read(rig)
    out = rig.drainer.uncordon(planned)

    node = rig.node()
    assert out["untainted"] is False and out["uncordoned"] is False
    assert "changed since the compensation read it" in out["note"]  # the drain's cause says so
    assert node["spec"]["unschedulable"] is True
    assert "spot interruption warning w-1" in node["metadata"]["annotations"]["spillway.io/cordoned"]
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"]["taints"])


def test_a_compensation_that_finds_its_cordon_gone_leaves_a_taint_a_later_drain_made(rig: Rig) -> None:
    """A plan reused the node (the drain's cordon and taint came off), so the compensation reads no
    Spillway cordon and lifts only a stray taint; a Spot warning's drain cordons and taints the node
    right after that read. The taint removal is guarded too: only from a Node no Spillway cordon holds,
    so the warning's taint stays with its cordon. (Found by review: the unguarded removal lifted it.)"""
    planned = rig.cordoned(reason="idle 12 min", plan_id="20261102T100000Z-abc")
    assert rig.kube.uncordon(NODE) is True  # the plan's reuse
    _warning_right_after_the_next_read(rig)
    out = rig.drainer.uncordon(planned)

    node = rig.node()
    assert out["untainted"] is False and out["uncordoned"] is False and node["spec"]["unschedulable"] is True
    assert out["note"].startswith("the node carries no Spillway cordon")
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"]["taints"])


HEALTH_ARN = "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/abc"


def _scheduled_change_drain(rig: Rig, notice: Notice) -> Drain:
    """The interrupt function's drain of a scheduled change, validated as DrainNode does (under its
    execution's name), then cordoned."""
    plan = drain_plan(notice, rig.clock(), InterruptSettings())
    assert plan is not None
    request = {"cluster": CLUSTER, "node": NODE, "instance_id": INSTANCE, "region": "us-east-1",
               "reason": plan.reason, "deadline_seconds": plan.deadline_seconds, "poll_seconds": plan.poll_seconds,
               "force": plan.force, "terminate": True, "leaving": True}  # fmt: skip
    name = execution_name(notice, INSTANCE, forced=plan.force)
    drain = Drain.model_validate(
        run_action(rig.drainer, {"action": "validate", "request": request, "execution": name})["drain"]
    )
    rig.drainer.cordon(drain)
    return drain


def test_the_two_drains_of_one_scheduled_change_each_undo_only_their_own_cordon(rig: Rig) -> None:
    """AWS Health announces an instance retirement more than a day ahead (a drain without force), then
    sends an update of the same event within the day (a forced drain, its execution ``...-force``). Both
    wrote the cordon ``held drain: scheduled change <arn>``, so when the first met its deadline (a
    budget kept web-0 there) its compensation took that cordon for its own and uncordoned the node
    under the forced drain. Each drain's cordon now names its execution. (Found by review.)"""
    start = T0 + timedelta(hours=30)
    rig.pod("web-0")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))
    unforced = _scheduled_change_drain(
        rig, Notice("scheduled", "e-1", "us-east-1", T0, (INSTANCE,), start=start, code=HEALTH_ARN)
    )
    rig.clock.advance(8 * 3600)
    update = Notice("scheduled", "e-2", "us-east-1", rig.clock(), (INSTANCE,), start=start, code=HEALTH_ARN)
    forced = _scheduled_change_drain(rig, update)
    assert (unforced.force, forced.force, unforced.reason) == (False, True, forced.reason)

    compensation = rig.drainer.uncordon(unforced)  # its deadline (a day) came with web-0 still there

    node = rig.node()
    assert "another drain holds the node" in compensation["note"]
    assert node["spec"].get("unschedulable") is True
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"].get("taints") or [])
    cordon = node["metadata"]["annotations"]["spillway.io/cordoned"]
    assert cordon.split(" ", 4)[1:4] == ["held", "drain", f"{forced.name}:"]
    assert forced.name == execution_name(update, INSTANCE, forced=True)
    # its own, but forced within a day of the change: the instance goes, the cordon stays
    assert "EC2 takes the instance" in rig.drainer.uncordon(forced)["note"]


def test_a_cordon_written_before_drains_had_names_is_undone_by_its_drain_and_no_other(rig: Rig) -> None:
    """A drain validated before the upgrade carries no name (executions in flight keep their drain
    object): it writes and recognises the old ``<time> held drain: <reason>``. A named drain never
    takes that cordon for its own, whatever its reason, nor does an unnamed drain take a named one's."""
    old = rig.validated(reason="scheduled change arn:x", leaving=True).model_dump()
    old.pop("name")
    legacy = Drain.model_validate(old)
    named = rig.validated(reason="scheduled change arn:x", leaving=True, force=True)
    rig.drainer.cordon(legacy)
    written = rig.node()["metadata"]["annotations"]["spillway.io/cordoned"]

    left = rig.drainer.uncordon(named)  # the legacy drain holds the node
    rig.drainer.cordon(named)
    also_left = rig.drainer.uncordon(legacy)  # the named drain took it over
    rig.drainer.cordon(legacy)
    undone = rig.drainer.uncordon(legacy)  # its own again

    assert written.split(" ", 1)[1] == "held drain: scheduled change arn:x"
    assert "another drain holds" in left["note"] and "another drain holds" in also_left["note"]
    assert undone == {"untainted": True, "uncordoned": True}


def test_a_drain_whose_node_another_drain_took_over_ends_superseded_undoing_nothing(rig: Rig) -> None:
    """The scheduled change's drain without force went on polling after its forced successor took the
    node over, until its deadline (a day): it then failed with DrainTimeout and raised the drain alarm
    for what is a normal hand-over. It now stops at its next step, evicting and undoing nothing, and
    records ``superseded``: a success, the other drain named. (Found by review.)"""
    start = T0 + timedelta(hours=30)
    rig.pod("web-0")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))
    unforced = _scheduled_change_drain(
        rig, Notice("scheduled", "e-1", "us-east-1", T0, (INSTANCE,), start=start, code=HEALTH_ARN)
    )
    first = rig.drainer.evict(unforced)  # web-0 stays: its budget allows no disruption
    rig.clock.advance(8 * 3600)
    update = Notice("scheduled", "e-2", "us-east-1", rig.clock(), (INSTANCE,), start=start, code=HEALTH_ARN)
    forced = _scheduled_change_drain(rig, update)
    rig.api.clear_requests()

    with pytest.raises(DrainSuperseded) as evicting:
        rig.drainer.evict(unforced, first)
    with pytest.raises(DrainSuperseded):
        rig.drainer.check(unforced)
    assert rig.writes() == []  # nothing evicted, nothing undone
    out = run_action(rig.drainer, {"action": "record", "outcome": "superseded", "state": {
        "drain": unforced.model_dump(), "round": first,
        "superseded": _lambda_error("DrainSuperseded", str(evicting.value))}})  # fmt: skip

    assert forced.name in str(evicting.value)
    assert out["outcome"] == "superseded" and "error" not in out and "cause" not in out
    assert forced.name in out["note"] and out["node"] == NODE and out["rounds"] == 1
    assert rig.outcomes == [("superseded", NODE)]
    event = rig.api.list("Event")[-1]
    assert (event["reason"], event["type"]) == ("SpillwayDrainSuperseded", "Normal")
    node = rig.node()
    assert node["spec"]["unschedulable"] is True
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"]["taints"])
    assert f"drain {forced.name}:" in node["metadata"]["annotations"]["spillway.io/cordoned"]
    assert rig.drainer.evict(forced)["rounds"] == 1  # the drain that holds the node goes on


@pytest.mark.parametrize(
    "first",
    [
        {"reason": "idle 12 min", "plan_id": "20261102T100000Z-abc"},  # a plan's, overtaken by a warning
        {"reason": "rebalance recommendation r-1", "leaving": True, "deadline_seconds": 600},
    ],
)
def test_any_drain_overtaken_by_another_stops_as_superseded(rig: Rig, first: dict[str, Any]) -> None:
    drain = rig.cordoned(**first)
    rig.cordoned(reason="spot interruption warning w-1", leaving=True, force=True)
    with pytest.raises(DrainSuperseded, match="spot interruption warning w-1"):
        rig.drainer.evict(drain)


def _uncordoned_by_a_person(rig: Rig) -> None:
    node = rig.node()  # `kubectl uncordon` clears spec.unschedulable and leaves our annotation
    node["spec"]["unschedulable"] = False
    rig.api.update("Node", node)


def test_only_another_spillway_drains_cordon_supersedes_a_drain(rig: Rig) -> None:
    """A node a person uncordoned, or that somebody else cordoned since, is no hand-over: a plan's drain
    is cancelled as before (compensated, the drain alarm raised), and a leaving instance's drain goes on
    (the instance goes anyway), also when the cordon a person undid was another drain's."""
    planned = rig.cordoned(plan_id="20261102T100000Z-abc")
    rig.pod("web-0", annotations={"karpenter.sh/do-not-disrupt": "true"})  # keeps every drain busy
    leaving = rig.validated(reason="rebalance recommendation r-1", leaving=True)
    _uncordoned_by_a_person(rig)
    with pytest.raises(DrainCancelled, match="no longer cordoned by Spillway"):
        rig.drainer.evict(planned)

    rig.drainer.cordon(leaving)  # takes the node over; then a person uncordons it
    _uncordoned_by_a_person(rig)
    with pytest.raises(DrainCancelled, match="no longer cordoned by Spillway"):
        rig.drainer.evict(planned)  # another drain's cordon, undone: not a hand-over
    assert rig.drainer.evict(leaving)["done"] is False

    rig.kube.uncordon(NODE)
    _cordoned_by_somebody(rig)  # a person's cordon, no annotation
    assert rig.drainer.evict(leaving)["done"] is False
    with pytest.raises(DrainCancelled, match="no longer cordoned by Spillway"):
        rig.drainer.evict(planned)


def test_a_forced_drain_goes_on_when_a_drain_without_force_takes_its_node_over(rig: Rig) -> None:
    """A rebalance recommendation may reach Spillway after the Spot warning: its drain (no force) takes
    the node over. Were the warning's drain superseded, the pods only force evicts would die with the
    instance; it goes on, as before (a forced drain never times out)."""
    rig.pod("train-0", app="train", annotations={"karpenter.sh/do-not-disrupt": "true"})
    warned = rig.cordoned(reason="spot interruption warning w-1", leaving=True, force=True)
    rig.cordoned(reason="rebalance recommendation r-1", leaving=True)
    assert rig.drainer.evict(warned)["evicted"] == ["team-a/train-0"]


@pytest.mark.parametrize("name", ["", "two words", "a:b", "x" * 81, 7])
def test_validate_refuses_an_execution_name_a_cordon_cannot_carry(rig: Rig, name: Any) -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        run_action(rig.drainer, {"action": "validate", "request": {"cluster": CLUSTER, "node": NODE},
                                 "execution": name})  # fmt: skip
    assert caught.value.field == "execution"


def test_cordon_stops_when_somebody_else_cordoned_the_node_after_validation(rig: Rig) -> None:
    drain = rig.validated()
    _cordoned_by_somebody(rig)
    with pytest.raises(DrainCancelled, match="cordoned by somebody else"):
        rig.drainer.cordon(drain)
    assert "spillway.io/cordoned" not in rig.node()["metadata"]["annotations"]


TERMINATING = "evicted, terminating"  # why an evicted pod is still there after its round


def left_over(round_: dict[str, Any]) -> dict[str, str]:
    """The pods a round leaves on the node, and why."""
    return {r["pod"]: r["reason"] for r in round_["remaining"]}


def test_eviction_respects_a_budget_one_pod_per_round(rig: Rig) -> None:
    rig.api.add(objects.daemonset_pod("aws-node-x", NODE))
    rig.pod("web-0")
    rig.pod("web-1")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))
    drain = rig.cordoned(poll_seconds=1, deadline_seconds=60)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"] and first["blocked"] == ["team-a/web-1"]
    assert first["remaining"] == [
        {"pod": "team-a/web-0", "reason": TERMINATING},  # the evicted pod, until its kubelet confirms
        {"pod": "team-a/web-1", "reason": "a PodDisruptionBudget allows no disruption now"},
    ]
    assert first["done"] is False

    rig.clock.advance(1)  # the poll: web-0's containers have stopped, it is gone
    again = rig.drainer.evict(drain, first)  # no replacement yet: still blocked
    assert again["done"] is False and again["rounds"] == 2
    assert left_over(again) == {"team-a/web-1": "a PodDisruptionBudget allows no disruption now"}

    rig.pod("web-2", node=SPARE)  # the controller's replacement is Running and Ready elsewhere
    rig.clock.advance(1)
    last = rig.drainer.evict(drain, again)
    assert last["evicted"] == ["team-a/web-0", "team-a/web-1"] and last["evicted_count"] == 2
    assert left_over(last) == {"team-a/web-1": TERMINATING} and last["done"] is False
    rig.clock.advance(1)
    gone = rig.drainer.evict(drain, last)
    assert gone["done"] is True and gone["remaining"] == [] and gone["evicted_count"] == 2
    assert rig.api.get("Pod", "aws-node-x", "kube-system") is not None


def _two_budgets(rig: Rig) -> None:
    """team-a/web-0 (evicted first: the lowest priority) is selected by two budgets that both allow a
    disruption; team-a/db-0 by none."""
    rig.api.add(objects.pod("web-0", "team-a", node_name=NODE, labels={"app": "web", "tier": "front"},
                            owner=("ReplicaSet", "web-5d9c")))  # fmt: skip
    rig.api.add(objects.pdb("by-app", "team-a", {"app": "web"}, max_unavailable=1))
    rig.api.add(objects.pdb("by-tier", "team-a", {"tier": "front"}, max_unavailable=1))
    rig.pod("db-0", app="db", priority=10)


def test_a_pod_under_two_budgets_is_reported_and_the_round_goes_on(rig: Rig) -> None:
    # the Eviction API answers such a pod 500 ("This pod has more than one PodDisruptionBudget, which the
    # eviction subresource does not support."), every time: a refusal, not an outage
    _two_budgets(rig)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=30)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/db-0"]
    assert first["blocked"] == ["team-a/web-0"]
    left = left_over(first)
    assert left.pop("team-a/db-0") == TERMINATING
    assert "more than one PodDisruptionBudget" in left.pop("team-a/web-0") and not left
    assert first["done"] is False

    rig.clock.advance(30)
    with pytest.raises(DrainTimeout, match=r"team-a/web-0 \(.*more than one PodDisruptionBudget"):
        rig.drainer.evict(drain, first)
    assert rig.api.get("Pod", "web-0", "team-a") is not None


def test_a_forced_drain_finishes_at_its_deadline_past_a_pod_under_two_budgets(rig: Rig) -> None:
    _two_budgets(rig)
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=30)
    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/db-0"] and first["done"] is False
    rig.clock.advance(31)
    last = rig.drainer.evict(drain, first)
    assert (last["done"], last["forced"]) == (True, True)


def test_a_throttled_eviction_is_retried_next_round_and_no_budget_is_blamed(rig: Rig) -> None:
    # API Priority and Fairness answers 429 too, without the DisruptionBudget cause of a budget's refusal
    rig.pod("web-0")
    rig.pod("db-0", app="db", priority=10)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    rig.api.faults.fail_next(1, 429, "/api/v1/namespaces/team-a/pods/web-0/eviction")

    first = rig.drainer.evict(drain)
    reasons = left_over(first)
    assert "PodDisruptionBudget" not in reasons["team-a/web-0"] and "throttled" in reasons["team-a/web-0"]
    assert first["blocked"] == [] and first["done"] is False
    # the server asked to slow down: the round stops there, the next pod waits for the next round
    assert first["evicted"] == [] and reasons["team-a/db-0"] == "not evicted yet"

    again = rig.drainer.evict(drain, first)
    assert again["evicted"] == ["team-a/web-0", "team-a/db-0"]
    rig.clock.advance(5)
    assert rig.drainer.evict(drain, again)["done"] is True


def _budget_status(rig: Rig, name: str, **status: Any) -> None:
    """Write a budget's status by hand, as a controller other than the emulator's would have."""
    pdb = rig.api.get("PodDisruptionBudget", name, "team-a")
    assert pdb is not None
    rig.api.update("PodDisruptionBudget", {**pdb, "status": {**pdb["status"], **status}})


@pytest.mark.parametrize(
    ("status", "why"),
    [
        ({"disruptionsAllowed": -1}, "pdb disruptions allowed is negative"),
        (
            {"disruptedPods": {f"gone-{i}": "2026-11-02T09:59:00Z" for i in range(2001)}},
            "DisruptedPods map too big",
        ),
    ],
)
def test_a_budget_whose_status_forbids_evictions_refuses_its_pod_and_the_round_goes_on(
    rig: Rig, status: dict[str, Any], why: str
) -> None:
    """The Eviction API answers 403 Forbidden naming the budget (not RBAC's 403): that pod waits for a
    later round like one a budget's 429 holds, and the other pods go. (Found by review: every 403 was
    KubeAuthError and aborted the round.)"""
    rig.pod("web-0")
    rig.pod("web-1", node=SPARE)
    rig.pod("db-0", app="db", priority=10)
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, max_unavailable=1))
    _budget_status(rig, "web", **status)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=30)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/db-0"] and first["blocked"] == ["team-a/web-0"]
    left = left_over(first)["team-a/web-0"]
    assert "its PodDisruptionBudget refuses" in left and '"web"' in left and why in left, left
    assert first["done"] is False
    assert rig.api.get("Pod", "web-0", "team-a") is not None

    rig.clock.advance(30)
    with pytest.raises(DrainTimeout, match=r"team-a/web-0 \(its PodDisruptionBudget refuses"):
        rig.drainer.evict(drain, first)


def test_a_pod_whose_namespace_is_terminating_is_waited_for_and_the_round_goes_on(rig: Rig) -> None:
    """An eviction in a namespace being deleted is 403 Forbidden with a NamespaceTerminating cause: the
    namespace controller deletes the pod, so the drain waits for it (as kubectl drain does)."""
    rig.pod("web-0")
    rig.api.add(objects.pod("api-0", "team-b", node_name=NODE, labels={"app": "api"},
                            owner=("ReplicaSet", "api-5d9c")))  # fmt: skip
    namespace = rig.api.get("Namespace", "team-a")
    assert namespace is not None
    rig.api.update("Namespace", {**namespace, "status": {"phase": "Terminating"}})
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-b/api-0"] and first["blocked"] == []
    left = left_over(first)
    assert "namespace team-a is being deleted" in left["team-a/web-0"], left
    assert first["done"] is False

    rig.api.delete("Pod", "web-0", "team-a")  # the namespace controller
    rig.clock.advance(5)
    assert rig.drainer.evict(drain, first)["done"] is True


def test_an_rbac_refusal_of_an_eviction_still_stops_the_drain(rig: Rig) -> None:
    rig.pod("web-0")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    rig.api.faults.fail_next(1, 403, "/api/v1/namespaces/team-a/pods/web-0/eviction")
    with pytest.raises(KubeAuthError, match=r"evict pod team-a/web-0.*403"):
        rig.drainer.evict(drain)


def test_protected_pods_stay_until_the_deadline_then_the_drain_times_out(rig: Rig) -> None:
    rig.pod("train-0", app="train", annotations={"karpenter.sh/do-not-disrupt": "true"})
    rig.pod("solo", bare=True)
    rig.pod("web-0")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=30)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"]
    assert [r["pod"] for r in first["remaining"]] == ["team-a/solo", "team-a/train-0", "team-a/web-0"]

    rig.clock.advance(30)
    with pytest.raises(DrainTimeout) as caught:
        rig.drainer.evict(drain, first)
    message = str(caught.value)
    assert "2 pod(s) still there at the deadline (30 s)" in message
    assert "team-a/train-0 (annotated karpenter.sh/do-not-disrupt=true" in message
    assert rig.api.get("Pod", "train-0", "team-a") is not None


def test_force_evicts_protected_pods_and_goes_on_at_the_deadline(rig: Rig) -> None:
    rig.pod("train-0", app="train", annotations={"karpenter.sh/do-not-disrupt": "true"})
    rig.pod("db-0", app="db")
    rig.api.add(objects.pdb("db", "team-a", {"app": "db"}, min_available=1))
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=30)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/train-0"] and first["done"] is False

    rig.clock.advance(31)
    last = rig.drainer.evict(drain, first)
    assert last["done"] is True and last["forced"] is True
    assert rig.drainer.check(drain)["ready"] is True


def test_eviction_stops_when_the_node_was_uncordoned_meanwhile(rig: Rig) -> None:
    rig.pod("web-0")
    drain = rig.cordoned()
    rig.kube.uncordon(NODE)  # the planner reuses the node for pending pods
    with pytest.raises(DrainCancelled, match="no longer cordoned by Spillway"):
        rig.drainer.evict(drain)
    assert rig.api.get("Pod", "web-0", "team-a") is not None


# --- check, terminate, delete, compensate ---------------------------------------------------------


def test_check_sends_the_drain_back_when_a_pod_arrived(rig: Rig) -> None:
    drain = rig.cordoned()
    assert rig.drainer.check(drain) == {"ready": True, "forced": False, "remaining": []}
    # bound by name (spec.nodeName skips kube-scheduler's filters): the cordon did not keep it away
    rig.pod("late-0", app="late", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert rig.drainer.check(drain)["ready"] is False
    # one that tolerates the cordon and the draining taint is not waited for: it goes with the node
    rig.api.delete("Pod", "late-0", "team-a")
    rig.pod("agent-0", app="agent", tolerations=[{"operator": "Exists"}])
    assert rig.drainer.check(drain)["ready"] is True


@pytest.mark.parametrize(
    ("request_", "arrival"),
    [
        # a plan's scale-down: a pod that tolerates the cordon and the draining taint, which kube-scheduler
        # may well put on the emptied node (the least allocated), is work the plan never judged
        ({"plan_id": "20261102T100000Z-abc", "reason": "idle 12 min"},
         {"name": "agent-0", "app": "agent", "tolerations": [{"operator": "Exists"}]}),
        # a drain by hand: a pod marked never to be disturbed, bound by name (spec.nodeName skips the
        # cordon and the taint), keeps the node
        ({}, {"name": "train-0", "app": "train", "annotations": {"karpenter.sh/do-not-disrupt": "true"},
              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}),
    ],
)  # fmt: skip
def test_the_terminate_step_terminates_nothing_for_a_pod_that_came_after_the_check(
    rig: Rig, request_: dict[str, Any], arrival: dict[str, Any]
) -> None:
    """The check before terminating found the node empty, then a pod the drain may not take with the node
    landed on it before the terminate step ran (that step is retried for throttling for up to a few
    minutes). The terminate step terminated the instance without a look at the node, and the pod (a
    do-not-disrupt one, or work no plan judged) died with it. It asks the check's question again, right
    before TerminateInstanceInAutoScalingGroup: not ready, it terminates nothing and sends the drain back
    to its eviction rounds (``ready`` false), which abandon it or wait, as after a check not ready."""
    drain = rig.cordoned(**request_)
    assert rig.drainer.check(drain)["ready"] is True
    name = arrival.pop("name")
    rig.pod(name, **arrival)

    out = run_action(rig.drainer, {"action": "terminate", "drain": drain.model_dump(), "attempt": 0})

    assert rig.cloud.terminated() == [], out
    assert out["ready"] is False and out["status"] == "NotTerminated", out
    assert [r["pod"] for r in out["remaining"]] == [f"team-a/{name}"], out
    assert rig.api.get("Pod", name, "team-a") is not None


def test_the_terminate_steps_check_the_api_cannot_answer_terminates_nothing_and_raises_nothing(
    rig: Rig,
) -> None:
    """The terminate step's own check met the API server down. It raised KubeUnavailable, which the state
    retried: the retry's ``$$.State.RetryCount`` (1) said an earlier attempt may have terminated the
    instance though none called AWS, so one another terminated meanwhile was recorded ``terminated``
    rather than ``gone``. Now, with the deadline ahead, it terminates nothing and sends the drain back
    to its rounds (whose steps retry the API); past it (the rounds would find the node empty and send it
    back here, with nothing to end the loop) the error stands and the drain fails, terminating nothing.
    The state machine retries no Kubernetes error on that step."""
    drain = rig.cordoned()
    assert rig.drainer.check(drain)["ready"] is True
    rig.api.faults.fail_next(10**6, 503)
    event = {"action": "terminate", "drain": drain.model_dump(), "attempt": 0}

    out = run_action(rig.drainer, event)

    assert rig.cloud.terminated() == [], out
    assert out["ready"] is False and out["status"] == "NotTerminated", out
    assert "could not be checked (KubeUnavailable" in out["note"], out
    rig.clock.advance(drain.deadline_seconds)
    with pytest.raises(KubeUnavailable):
        run_action(rig.drainer, event)
    assert rig.cloud.terminated() == []
    retried = {e for r in _asl("drain_node.asl.json")["States"]["TerminateThroughFunction"]["Retry"]
               for e in r["ErrorEquals"]}  # fmt: skip
    assert not retried & {"KubeUnavailable", "KubeConflict"}, retried


def test_check_stops_when_the_node_was_replaced(rig: Rig) -> None:
    drain = rig.cordoned()
    rig.api.delete("Node", NODE)
    rig.api.add(objects.node(NODE, instance="i-0ffffffffffffffff", zone="us-east-1a", annotations={
        "spillway.io/cordoned": "x"}, unschedulable=True))  # fmt: skip
    with pytest.raises(DrainCancelled, match="replaced"):
        rig.drainer.check(drain)


def test_terminate_decrements_the_group(rig: Rig) -> None:
    drain = rig.cordoned()
    out = rig.drainer.terminate(drain)
    assert rig.cloud.terminated() == [("us-east-1", INSTANCE, True)]
    assert out == {
        "activity_id": f"a-{INSTANCE}",
        "status": "InProgress",
        "description": f"Terminating EC2 instance: {INSTANCE}",
    }


def test_a_retried_terminate_of_a_terminated_instance_succeeds_and_says_so(rig: Rig) -> None:
    drain = rig.cordoned()
    rig.drainer.terminate(drain)  # terminated; say the Lambda then timed out and the step is retried
    again = rig.drainer.terminate(drain)
    assert rig.cloud.terminated() == [("us-east-1", INSTANCE, True)]  # not terminated twice
    assert again["status"] == "AlreadyTerminating"
    assert f"{INSTANCE} was already no longer in Auto Scaling group general" in again["description"]


def _left_mid_drain(rig: Rig, *, to: str | None = None, state: str = "running") -> None:
    """Between the eviction and the terminate step the instance left its group alive: DetachInstances
    by a person or a tool (``to`` None), or detached and attached to group ``to``; EC2 still runs it."""
    raw = rig.cloud.groups[("us-east-1", "general")]
    moved = [i for i in raw["Instances"] if i["InstanceId"] == INSTANCE]
    raw["Instances"] = [i for i in raw["Instances"] if i["InstanceId"] != INSTANCE]
    raw["DesiredCapacity"] -= 1
    if to is not None:
        rig.cloud.add_group(to, [], desired=0)
        rig.cloud.groups[("us-east-1", to)]["Instances"] = moved
        rig.cloud.groups[("us-east-1", to)]["DesiredCapacity"] = 1
    rig.cloud.ec2[INSTANCE] = {"region": "us-east-1", "state": state, "tags": {}}


@pytest.mark.parametrize("to", [None, "batch"])
def test_a_drain_whose_instance_left_its_group_mid_drain_terminates_nothing_and_gives_the_node_back(
    rig: Rig, to: str | None
) -> None:
    """The terminate step took an instance out of its group for one already terminated (a retried
    call's), so a drain whose instance was detached (or moved to another group) after its validation
    recorded it terminated and deleted the Node of an instance EC2 still ran: a paid instance no
    Node stood for. Auto Scaling no longer holds it and EC2 runs it, so nothing is terminated: the drain
    is cancelled, and its compensation gives the node back (uncordoned, as any failed drain)."""
    rig.pod("web-0")
    drain = rig.cordoned()
    rig.drainer.evict(drain)
    _left_mid_drain(rig, to=to)
    rig.cloud.calls.clear()

    outcome = _terminate_or_compensate(rig, drain)

    assert outcome["error"] == "DrainCancelled", outcome
    assert rig.cloud.called("terminate_instance") == []
    assert outcome["compensation"].get("instance_gone") is None, outcome
    assert outcome["compensation"]["uncordoned"] is True, outcome
    assert not rig.node()["spec"].get("unschedulable")  # the Node stays, back in service
    state = {"drain": drain.model_dump(), "error": {"Error": "DrainCancelled", "Cause": "x"},
             "compensation": outcome["compensation"]}  # fmt: skip
    assert rig.drainer.record(state)["outcome"] == OUTCOME_OF_ERROR["DrainCancelled"] == "cancelled"


@pytest.mark.parametrize("planned", [False, True])
def test_terminate_suspended_since_the_validation_terminates_nothing_and_gives_the_node_back(
    rig: Rig, planned: bool
) -> None:
    """The group's Terminate process was suspended between the eviction and the terminate step, its
    instance InService: Auto Scaling terminates none of its InService instances then (EC2 Auto Scaling
    User Guide, "Considerations for suspending processes"), and the validation refuses such a drain
    (a plan's cancelled) for that; but the terminate step did not look again and called
    TerminateInstanceInAutoScalingGroup all the same (act.instances.terminate_held: an InService
    instance is not asked for). Now nothing is asked: the drain is cancelled, its compensation gives
    the node back (uncordoned, as any drain the terminate step cancels), and the record says why on the
    Node (SpillwayDrainCancelled), naming the process to resume."""
    drain = rig.cordoned(**({"plan_id": PLAN} if planned else {}))  # its pods evicted: none left
    _terminate_suspended(rig)
    rig.cloud.calls.clear()
    with pytest.raises(DrainCancelled) as cancelled:
        rig.drainer.terminate(drain)

    outcome = _terminate_or_compensate(rig, drain)

    assert outcome["error"] == "DrainCancelled", outcome
    assert rig.cloud.called("terminate_instance") == []
    assert outcome["compensation"]["uncordoned"] is True, outcome
    assert not rig.node()["spec"].get("unschedulable")  # the Node stays, back in service
    cause = str(cancelled.value)
    assert "Terminate process suspended" in cause and INSTANCE in cause and "resume" in cause, cause
    state = {"drain": drain.model_dump(), "error": {"Error": "DrainCancelled", "Cause": cause},
             "compensation": outcome["compensation"]}  # fmt: skip
    assert rig.drainer.record(state)["outcome"] == "cancelled"
    [event] = [e for e in rig.api.list("Event") if e["reason"] == "SpillwayDrainCancelled"]
    assert "Terminate process suspended" in event["message"], event


@pytest.mark.parametrize("state", ["Pending:Wait", None])
def test_terminate_suspended_since_the_validation_still_terminates_what_auto_scaling_terminates(
    rig: Rig, state: str | None
) -> None:
    """The suspension does not cover an instance that is not InService (Pending:Wait), nor a Spot
    warning's drain, whose instance EC2 reclaims anyway (``state`` None): both are terminated at the
    terminate step as the validation would let them be."""
    drain = rig.cordoned(**(_notice_drain("interruption") if state is None else {}))
    _terminate_suspended(rig)
    if state is not None:
        rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = state

    outcome = _terminate_or_compensate(rig, drain)

    assert "error" not in outcome and rig.cloud.called("terminate_instance"), outcome


def test_the_terminate_step_says_where_the_instance_went_when_it_left_its_group(rig: Rig) -> None:
    drain = rig.cordoned()
    _left_mid_drain(rig, to="batch")
    with pytest.raises(DrainCancelled, match=r"left Auto Scaling group general.*batch.*EC2: running"):
        rig.drainer.terminate(drain)


@pytest.mark.parametrize("state", ["shutting-down", "terminated", None])
def test_an_instance_out_of_its_group_that_ec2_no_longer_runs_is_terminated(
    rig: Rig, state: str | None
) -> None:
    """The other way out of a group: its termination (a retried terminate step's first call, a Spot
    reclaim). EC2 says so, or no longer knows the instance: terminated, as before."""
    drain = rig.cordoned()
    _left_mid_drain(rig, state=state or "running")
    if state is None:
        del rig.cloud.ec2[INSTANCE]
    out = rig.drainer.terminate(drain)
    assert out["status"] == "AlreadyTerminating" and rig.cloud.called("terminate_instance") == []


@pytest.mark.parametrize("to", [None, "batch"])
def test_a_spot_warnings_drain_whose_instance_left_its_group_mid_drain_ends_drained_outside_it(
    rig: Rig, to: str | None
) -> None:
    """EC2 reclaims a Spot instance whatever group holds it: its drain whose instance left its group
    after the validation terminates nothing and ends ``drained``, ``outside_group``, the node left
    cordoned, as when the detach came before the validation (the state machine's LeftGroup choice)."""
    rig.pod("web-0")
    drain = rig.cordoned(**_notice_drain("interruption"))
    assert drain.notice == "interruption" and drain.terminate
    rig.drainer.evict(drain)
    _left_mid_drain(rig, to=to)
    outcome = _terminate_or_compensate(rig, drain)
    assert "error" not in outcome and rig.cloud.called("terminate_instance") == [], outcome
    terminated = outcome["terminated"]
    assert terminated["status"] == "LeftGroup" and terminated["outside_group"] is True, terminated
    summary = rig.drainer.record({"drain": drain.model_dump(), "terminated": terminated}, "drained")
    assert summary["outcome"] == "drained" and summary["outside_group"] is True, summary
    assert "not terminated" in summary["note"] and "Spot warning" in summary["note"], summary
    assert rig.node()["spec"]["unschedulable"] is True
    drained = [e for e in rig.api.list("Event") if e["reason"] == "SpillwayDrained"]
    assert drained and "left Auto Scaling group general" in drained[-1]["message"]


@pytest.mark.parametrize("gone", ["terminating", "out-of-group"])
def test_a_first_terminate_attempt_that_finds_the_instance_gone_says_another_terminated_it(
    rig: Rig, gone: str
) -> None:
    """Two forced drains of one EC2 event, the second started after the first terminated the instance
    and deleted its Node: the second's terminate step found the instance already terminating, made no
    call, and the drain was recorded ``terminated``, so DrainOutcome counted the node twice. On the
    step's first attempt (the state machine passes ``$$.State.RetryCount``) no earlier call of this
    drain can have terminated it: the answer says another did (``by_another``). A retried attempt may
    be finding its own first call's work, and stays as it was."""
    drain = rig.cordoned(**_notice_drain("interruption"))
    if gone == "terminating":
        for instance in rig.cloud.groups[("us-east-1", "general")]["Instances"]:
            if instance["InstanceId"] == INSTANCE:
                instance["LifecycleState"] = "Terminating"
    else:
        _left_mid_drain(rig, state="shutting-down")
    event = {"action": "terminate", "drain": drain.model_dump()}

    first = run_action(rig.drainer, {**event, "attempt": 0})
    retried = run_action(rig.drainer, {**event, "attempt": 1})
    unknown = run_action(rig.drainer, event)

    assert rig.cloud.called("terminate_instance") == []
    assert first["status"] == "AlreadyTerminating" and first["by_another"] is True, first
    assert "not by this drain" in first["note"]
    for answer in (retried, unknown):
        assert answer["status"] == "AlreadyTerminating" and "by_another" not in answer, answer


def test_a_first_terminate_attempt_that_terminates_says_nothing_of_another(rig: Rig) -> None:
    drain = rig.cordoned()
    out = run_action(rig.drainer, {"action": "terminate", "drain": drain.model_dump(), "attempt": 0})
    assert out["status"] == "InProgress" and "by_another" not in out
    assert rig.cloud.terminated() == [("us-east-1", INSTANCE, True)]


def test_a_drain_whose_instance_another_terminated_is_recorded_gone_once(rig: Rig) -> None:
    """The record step of a drain whose terminate step found the instance terminated by another:
    ``gone`` (counted once under that outcome, not under ``terminated``), a Normal event, the Node's
    fate as for a terminated drain."""
    drain = rig.cordoned(**_notice_drain("interruption"))
    _left_mid_drain(rig, state="terminated")
    terminated = run_action(rig.drainer, {"action": "terminate", "drain": drain.model_dump(), "attempt": 0})
    state = {"drain": drain.model_dump(), "terminated": terminated, "deleted": rig.drainer.delete_node(drain)}

    summary = rig.drainer.record(state, "gone")

    assert summary["outcome"] == "gone" and summary["terminated"]["by_another"] is True, summary
    assert "not by this drain" in summary["note"] and "error" not in summary
    assert rig.outcomes == [("gone", NODE)]
    [event] = [e for e in rig.api.list("Event") if "already terminating" in e["message"]]
    assert event["type"] == "Normal" and event["reason"] == "SpillwayDrained"


def test_drain_node_records_gone_a_drain_whose_first_terminate_found_the_instance_gone() -> None:
    """The terminate step is told its retry count, and a first attempt's ``by_another`` answer goes to
    the record step as ``gone`` (DeleteNode first, as for any terminated instance); every other answer
    to ``terminated``."""
    states = _asl("drain_node.asl.json")["States"]
    assert states["TerminateThroughFunction"]["Parameters"]["attempt.$"] == "$$.State.RetryCount"
    choice = states["TerminatedBy"]
    assert choice["Default"] == "RecordTerminated"
    [rule] = choice["Choices"]
    assert rule["Next"] == "RecordGone"
    assert {"Variable": "$.terminated.by_another", "BooleanEquals": True} in rule["And"]
    assert states["RecordGone"]["Parameters"] == {
        "action": "record",
        "outcome": "gone",
        "state.$": "$",
        **EXECUTION,
    }


def test_terminate_of_an_instance_already_terminating_in_its_group_succeeds(rig: Rig) -> None:
    drain = rig.cordoned()
    group = rig.cloud.groups[("us-east-1", "general")]
    for instance in group["Instances"]:
        if instance["InstanceId"] == INSTANCE:
            instance["LifecycleState"] = "Terminating:Wait"
    out = rig.drainer.terminate(drain)
    assert out["status"] == "AlreadyTerminating" and "Terminating:Wait" in out["description"]
    assert rig.cloud.terminated() == []


def test_terminate_of_an_instance_still_in_service_fails_when_aws_says_not_found(rig: Rig) -> None:
    drain = rig.cordoned()
    rig.cloud.fail("terminate_instance", InstanceNotFound("no managed instance"))
    with pytest.raises(InstanceNotFound):
        rig.drainer.terminate(drain)


def test_compensation_after_a_failed_terminate_leaves_a_gone_instances_node_alone(rig: Rig) -> None:
    drain = rig.cordoned()
    rig.drainer.terminate(drain)
    out = rig.drainer.uncordon(drain, after_terminate=True)
    assert out["instance_gone"] is True and out["uncordoned"] is False
    assert rig.node()["spec"]["unschedulable"] is True  # the node goes with its instance
    state = {
        "drain": drain.model_dump(),
        "error": _lambda_error("Sandbox.Timedout", "Task timed out after 30.00 seconds"),
        "compensation": out,
        "deleted": rig.drainer.delete_node(drain),
    }
    summary = rig.drainer.record(state, "terminated")
    assert summary["outcome"] == "terminated" and summary["node_deleted"] is True
    assert summary["terminated"]["status"] == "AlreadyTerminating"
    assert "pods left running" not in json.dumps(summary) and "error" not in summary
    assert rig.outcomes == [("terminated", NODE)]


def test_compensation_after_a_failed_terminate_of_a_live_instance_uncordons(rig: Rig) -> None:
    drain = rig.cordoned()
    out = rig.drainer.uncordon(drain, after_terminate=True)
    assert out == {"untainted": True, "uncordoned": True}
    assert not rig.node()["spec"].get("unschedulable")


def _terminate_or_compensate(rig: Rig, drain: Drain) -> dict[str, Any]:
    """The terminate step, then, when it fails, CompensateTerminate: as drain_node.asl.json runs them."""
    try:
        return {"terminated": run_action(rig.drainer, {"action": "terminate", "drain": drain.model_dump()})}
    except SpillwayError as exc:
        event = {"action": "uncordon", "after_terminate": True, "drain": drain.model_dump()}
        return {"error": type(exc).__name__, "compensation": run_action(rig.drainer, event)}


def test_two_spot_drains_at_once_the_second_terminates_without_decrementing_its_group_at_min_size(
    rig: Rig,
) -> None:
    """Spot reclaims two instances of a pool at once: both leaving drains were validated while the group
    was above its MinSize, so both meant to decrement it. The first terminate took the group to MinSize,
    AWS refused the second (ValidationError: terminating without replacement would violate the group's
    min size), and the compensation uncordoned and untainted a node EC2 was reclaiming: new pods landed
    on it and died with it. A leaving drain whose decrement AWS refuses terminates without decrementing
    (the group launches the replacement it needs at MinSize). (Found by review.)"""
    rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], min_size=1, desired=2)
    rig.pod("web-0")
    rig.pod("web-1", node=SPARE)
    warning = {"force": True, "leaving": True, "reason": "spot interruption warning", "deadline_seconds": 90,
               "poll_seconds": 5}  # fmt: skip
    first, second = rig.validated(**warning), rig.validated(**warning, node=SPARE)
    assert first.terminate and second.terminate  # both judged with desired 2 > MinSize 1
    for drain in (first, second):
        rig.drainer.cordon(drain)
        rig.drainer.evict(drain)
    rig.clock.advance(1)  # the kubelet confirms the evictions: the nodes are empty, as the checks found them

    _terminate_or_compensate(rig, first)
    outcome = _terminate_or_compensate(rig, second)

    node = rig.node(SPARE)
    assert node["spec"].get("unschedulable") is True, f"the reclaimed node was put back in service: {outcome}"
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"].get("taints") or [])
    assert rig.cloud.terminated() == [
        ("us-east-1", INSTANCE, True),
        ("us-east-1", SPARE_INSTANCE, True),  # refused: the group was at its MinSize by then
        ("us-east-1", SPARE_INSTANCE, False),
    ]
    assert "without decrementing" in outcome["terminated"]["note"]
    assert rig.cloud.describe_group("us-east-1", "general").DesiredCapacity == 1  # MinSize: replaced


def test_a_drain_not_leaving_whose_decrement_aws_refuses_fails_and_keeps_its_node(rig: Rig) -> None:
    """A drain by hand (or a plan's) that meets MinSize at terminate time terminates nothing: the node
    is not going away, so the compensation gives it back to the scheduler."""
    drain = rig.cordoned(force=True)
    rig.cloud.add_group("general", [INSTANCE, SPARE_INSTANCE], min_size=2, desired=2)  # raised since

    outcome = _terminate_or_compensate(rig, drain)

    assert outcome == {"error": "AsgLimitExceeded", "compensation": {"untainted": True, "uncordoned": True}}
    assert rig.cloud.terminated() == [("us-east-1", INSTANCE, True)]


def test_a_forced_drain_of_a_leaving_instance_keeps_its_node_cordoned_when_it_fails(rig: Rig) -> None:
    """A Spot warning's drain (or a scheduled change's within a day) that fails for any reason still
    loses its instance: uncordoning would only let new pods land on a node EC2 reclaims in seconds. The
    compensation keeps the cordon and the taint and says why. (Found by review.)"""
    warning = {"force": True, "leaving": True, "reason": "spot interruption warning", "deadline_seconds": 90}
    drain = rig.cordoned(**warning)
    rig.cloud.fail("terminate_instance", AwsUnavailable("Auto Scaling did not answer"))

    outcome = _terminate_or_compensate(rig, drain)

    assert outcome["error"] == "AwsUnavailable"
    assert outcome["compensation"]["uncordoned"] is False and outcome["compensation"]["untainted"] is False
    assert "EC2 takes the instance" in outcome["compensation"]["note"]
    node = rig.node()
    assert node["spec"].get("unschedulable") is True
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"].get("taints") or [])
    # the same after a failure before the terminate (Compensate, not CompensateTerminate)
    assert rig.drainer.uncordon(drain)["uncordoned"] is False
    state = {"drain": drain.model_dump(), "error": _lambda_error("KubeUnavailable", "API server down"),
             "compensation": outcome["compensation"]}  # fmt: skip
    assert "stays cordoned" in rig.drainer.record(state)["cause"]


def test_a_leaving_drain_without_force_is_undone_when_it_fails(rig: Rig) -> None:
    """A rebalance recommendation's drain (or a scheduled change's more than a day out) gives the node
    back when it fails: the instance may well stay."""
    drain = rig.cordoned(leaving=True, reason="rebalance recommendation", deadline_seconds=600)
    assert rig.drainer.uncordon(drain) == {"untainted": True, "uncordoned": True}
    assert not rig.node()["spec"].get("unschedulable")


def test_delete_node_deletes_only_the_drained_node(rig: Rig) -> None:
    drain = rig.cordoned()
    assert rig.drainer.delete_node(drain) == {"deleted": True}
    assert rig.api.get("Node", NODE) is None
    assert rig.drainer.delete_node(drain)["deleted"] is False
    rig.api.add(objects.node(NODE, instance="i-0ffffffffffffffff", zone="us-east-1a"))  # a newcomer
    assert rig.drainer.delete_node(drain)["deleted"] is False
    assert rig.api.get("Node", NODE) is not None


def test_compensation_removes_the_taint_and_spillways_cordon_only(rig: Rig) -> None:
    drain = rig.cordoned()
    assert rig.drainer.uncordon(drain) == {"untainted": True, "uncordoned": True}
    node = rig.node()
    assert not node["spec"].get("unschedulable")
    assert "spillway.io/cordoned" not in node["metadata"]["annotations"]
    assert "spillway.io/draining" not in [t["key"] for t in node["spec"]["taints"]]


def test_compensation_never_undoes_somebody_elses_cordon(rig: Rig) -> None:
    drain = rig.validated()
    _cordoned_by_somebody(rig)
    out = rig.drainer.uncordon(drain)
    assert out["untainted"] is False and out["uncordoned"] is False
    assert out["note"].startswith("the node carries no Spillway cordon")
    assert rig.node()["spec"]["unschedulable"] is True


# --- record and summarize --------------------------------------------------------------------------


def _lambda_error(name: str, message: str) -> dict[str, str]:
    return {
        "Error": name,
        "Cause": json.dumps({"errorType": name, "errorMessage": message, "stackTrace": []}),
    }


def test_record_of_a_success_is_the_executions_output(rig: Rig) -> None:
    drain = rig.cordoned(reason="idle")
    state = {
        "drain": drain.model_dump(),
        "round": {"rounds": 2, "evicted": ["team-a/web-0"], "evicted_count": 1},
        "terminated": {"activity_id": "a-1", "status": "InProgress", "description": "x"},
        "deleted": {"deleted": True},
    }
    out = rig.drainer.record(state, "terminated")
    assert out["outcome"] == "terminated" and out["node_deleted"] is True
    assert out["evicted"] == ["team-a/web-0"] and out["rounds"] == 2 and out["instance_id"] == INSTANCE
    assert rig.outcomes == [("terminated", NODE)]
    assert [e["reason"] for e in rig.api.list("Event")][-1] == "SpillwayDrained"


def test_record_of_a_failure_names_the_error_and_the_compensation(rig: Rig) -> None:
    drain = rig.cordoned()
    state = {
        "drain": drain.model_dump(),
        "round": {"rounds": 3, "evicted": [], "remaining": [{"pod": "team-a/db-0", "reason": "budget"}]},
        "error": _lambda_error("DrainTimeout", "Node 'x': 1 pod(s) still there at the deadline"),
        "compensation": {"untainted": True, "uncordoned": True},
    }
    out = rig.drainer.record(state)
    assert out["outcome"] == "timeout" and out["error"] == "DrainTimeout"
    assert out["cause"] == (
        "Node 'x': 1 pod(s) still there at the deadline; the node was uncordoned and its remaining pods left running"
    )
    assert out["remaining"] == [{"pod": "team-a/db-0", "reason": "budget"}]
    event = rig.api.list("Event")[-1]
    assert (event["reason"], event["type"]) == ("SpillwayDrainTimeout", "Warning")


def test_record_tells_a_person_how_to_undo_a_cordon_the_compensation_could_not(rig: Rig) -> None:
    drain = rig.cordoned()
    state = {
        "drain": drain.model_dump(),
        "error": {"Error": "AutoScaling.ValidationErrorException", "Cause": "min size"},
        "compensation_error": _lambda_error("KubeUnavailable", "API server down"),
    }
    out = rig.drainer.record(state)
    assert out["outcome"] == "failed"
    assert "undoing the cordon failed too (API server down)" in out["cause"]
    assert f"kubectl uncordon {NODE}" in out["cause"]


_BAD = _lambda_error("InvalidDrainRequest", "node: bad")


@pytest.mark.parametrize(
    ("state", "args", "identity"),
    [
        ({"cluster": CLUSTER, "node": ["not", "a", "name"], "error": _BAD}, (), {}),
        (
            {"request": {"cluster": CLUSTER, "node": NODE, "deadline_seconds": -5}, "error": _BAD},
            ("rejected",),
            {"node": NODE},
        ),
        ({"request": "ip-10-0-1-2", "error": _BAD}, ("rejected",), {}),
        ({"request": None, "error": _BAD}, ("rejected",), {}),
    ],
    ids=["before-request-state", "object", "string", "null"],
)
def test_record_of_a_rejection_reads_the_request_where_the_request_state_put_it(
    rig: Rig, state: dict[str, Any], args: tuple[str, ...], identity: dict[str, Any]
) -> None:
    """DrainNode's Request state puts the execution's input under ``request`` (any JSON: a node name
    alone too), and Validate's Catch the error beside it: the log line names the node that request
    named, and a request that is no object names none. An execution started before that state existed
    has the error beside the request's own fields (here a node that is no name): it is recorded
    rejected too. Either way the record touches nothing."""
    out = rig.drainer.record(state, *args)
    assert out == {
        "cluster": CLUSTER,
        **identity,
        "outcome": "rejected",
        "error": "InvalidDrainRequest",
        "cause": "node: bad",
    }
    assert rig.writes() == []
    assert rig.outcomes == [("rejected", identity.get("node"))]


def test_a_rejected_request_carrying_a_drain_object_posts_no_event(rig: Rig) -> None:
    drain = rig.validated()  # a complete drain object, as a request could carry one
    state = {
        "cluster": CLUSTER,
        "node": NODE,
        "drain": drain.model_dump(),
        "error": _lambda_error("InvalidDrainRequest", "drain: not a field of a drain request"),
    }
    rig.api.clear_requests()
    out = rig.drainer.record(state, "rejected")
    assert (out["outcome"], out["node"]) == ("rejected", NODE)
    assert rig.writes() == [] and rig.api.list("Event") == []
    assert rig.outcomes == [("rejected", NODE)]  # the log line names the node the request named


def test_summarize_reads_both_map_results_as_aws_returns_them() -> None:
    child = {
        "ExecutionArn": "arn:aws:states:us-east-1:1:execution:drain:drain-1-x",
        "Status": "FAILED",
        "Error": "DrainTimeout",
        "Cause": "Node 'b': 1 pod(s) still there at the deadline",
    }
    results = [
        {"execution": "arn:...:drain-0-x", "output": {"node": "a", "instance_id": "i-1", "outcome": "terminated"}},
        {"request": {"node": "b", "instance_id": "i-2"}, "error": {"Error": "States.TaskFailed", "Cause": json.dumps(child)}},
        {"request": {"node": "c"}, "error": {"Error": "StepFunctions.ExecutionLimitExceededException", "Cause": "too many"}},
    ]  # fmt: skip
    out = summarize(CLUSTER, "plan-1", results)
    lines = {d["node"]: d for d in out["drains"]}
    assert lines["a"]["outcome"] == "terminated" and lines["a"]["execution"] == "arn:...:drain-0-x"
    assert lines["b"]["outcome"] == "timeout" and lines["b"]["error"] == "DrainTimeout"
    assert lines["b"]["cause"].startswith("Node 'b'") and lines["b"]["execution"] == child["ExecutionArn"]
    assert lines["c"]["outcome"] == "failed" and lines["c"]["cause"] == "too many"
    assert out["counts"] == {"failed": 1, "terminated": 1, "timeout": 1}


def test_cause_message_reads_lambda_errors_and_plain_text() -> None:
    assert cause_message(json.dumps({"errorType": "X", "errorMessage": "boom"})) == "boom"
    assert cause_message("plain words") == "plain words"
    assert cause_message(None) == ""


@pytest.mark.parametrize(
    ("event", "field"),
    [({"action": "explode"}, "action"), ({"action": "cordon"}, "drain"), ({"action": "record"}, "state")],
)
def test_run_action_refuses_what_it_does_not_know(rig: Rig, event: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        run_action(rig.drainer, event)
    assert caught.value.field == field


def test_run_action_dispatches_each_step(rig: Rig) -> None:
    validated = run_action(rig.drainer, {"action": "validate", "request": {"cluster": CLUSTER, "node": NODE}})
    drain = validated["drain"]
    assert run_action(rig.drainer, {"action": "cordon", "drain": drain})["cordoned"] is True
    assert (
        run_action(rig.drainer, {"action": "evict", "drain": drain, "round": {"rounds": 0}})["done"] is True
    )
    assert run_action(rig.drainer, {"action": "check", "drain": drain})["ready"] is True
    assert run_action(rig.drainer, {"action": "uncordon", "drain": drain})["uncordoned"] is True


# --- the handler ---------------------------------------------------------------------------------


def _load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("drain_app_under_test", ROOT / "functions/drain/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_the_handler_module_imports_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CLUSTER_NAME", "REGIONS", "KUBE_URL"):
        monkeypatch.delenv(name, raising=False)
    app = _load_app()
    assert not [name for name in vars(app) if name.startswith("_services")]  # the wiring is spillway.clients


def test_the_outcome_metric_is_emf_with_an_outcome_dimension(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _load_app()
    logged: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(app.logger, "info", lambda message, extra: logged.append((message, extra)))
    app.emit_outcome("cancelled", {"node": NODE, "plan_id": "20261102T100000Z-abc", "note": "x"})
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert lines and lines[0]["DrainOutcome"] == [1.0] and lines[0]["Outcome"] == "cancelled"
    assert lines[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Spillway"
    # the log line names the drain, whatever its outcome (a cancelled or rejected one has no Drain)
    assert [(m, x["node"], x["plan_id"]) for m, x in logged] == [
        ("drain outcome", NODE, "20261102T100000Z-abc")
    ]


# --- the sample inputs in events/ ---------------------------------------------------------------


def test_the_sample_drain_inputs_say_what_they_claim() -> None:
    good = parse_request(json.loads((ROOT / "events/drain-node.json").read_text()))
    assert (good.cluster, good.terminate, good.dry_run) == ("ml", True, False)
    unknown = parse_request(json.loads((ROOT / "events/drain-node-unknown.json").read_text()))
    assert unknown.node.startswith("ip-10-250")  # well formed: refused by validation, for the node
    with pytest.raises(InvalidDrainRequest) as caught:
        parse_request(json.loads((ROOT / "events/drain-node-malformed.json").read_text()))
    for name in ("node: required", "deadline_seconds:", "poll_seconds:", "force:"):
        assert name in str(caught.value)


# --- the state machines' shape (their behaviour is in tests/e2e/test_drain.py) -----------------------


def _asl(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "statemachines" / name).read_text())
    return doc


def _targets(states: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for state in states.values():
        found |= {state[k] for k in ("Next", "Default") if k in state}
        found |= {c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])}
    return found


def test_drain_node_compensates_every_failure_before_termination_and_only_those() -> None:
    states = _asl("drain_node.asl.json")["States"]
    assert _targets(states) <= set(states)
    assert [c["Next"] for c in states["Cordon"]["Catch"]] == ["Compensate"]
    for name in ("Evict", "CheckBeforeTerminating"):  # but a drain another took over (not a failure)
        assert [c["Next"] for c in states[name]["Catch"]] == ["RecordSuperseded", "Compensate"], name
    # a failed terminate may have terminated all the same: its compensation asks first; its own check
    # may find the node taken over by another drain, which is no failure either
    assert [c["Next"] for c in states["TerminateThroughFunction"]["Catch"]] == [
        "RecordSuperseded",
        "CompensateTerminate",
    ]
    assert states["CompensateTerminate"]["Parameters"]["after_terminate"] is True
    gone = states["InstanceGone"]
    assert (gone["Choices"][0]["Next"], gone["Default"]) == ("GoneAnyway", "RecordFailure")
    # what the compensation found stands for the lost terminate answer (Terminated reads $.terminated)
    assert states["GoneAnyway"]["ResultPath"] == "$.terminated"
    assert states["GoneAnyway"]["Next"] == "CompleteOwnLifecycleAction"
    assert states["RecordRejection"]["Parameters"]["outcome"] == "rejected"
    assert [c["Next"] for c in states["Validate"]["Catch"]] == ["RecordRejection"]  # nothing to undo
    # the drain is named after its execution, and its cordon says so (a drain undoes only its own)
    assert states["Validate"]["Parameters"] == {
        "action": "validate",
        "request.$": "$.request",
        "execution.$": "$$.Execution.Name",
    }
    # the input, whatever JSON it is, under request: Validate's Catch writes $.error beside it
    assert _asl("drain_node.asl.json")["StartAt"] == "Request"
    request = states["Request"]
    assert (request["Type"], request["Parameters"], request["Next"]) == (
        "Pass",
        {"request.$": "$"},
        "Validate",
    )
    # instance gone: recorded terminated, or gone when another terminated it (TerminatedBy)
    assert (
        [c["Next"] for c in states["DeleteNode"]["Catch"]]
        == ["TerminatedBy"]
        == [states["DeleteNode"]["Next"]]
    )
    assert states["Fail"] == {"Type": "Fail", "ErrorPath": "$.outcome.error", "CausePath": "$.outcome.cause"}
    assert states["WaitForPods"]["SecondsPath"] == "$.drain.poll_seconds"


def test_a_drain_another_took_over_ends_superseded_without_compensating() -> None:
    """DrainSuperseded from a step after the cordon: recorded ``superseded`` and the execution succeeds
    (no drain alarm); nothing on that path undoes the cordon the other drain holds."""
    states = _asl("drain_node.asl.json")["States"]
    for name in ("Evict", "CheckBeforeTerminating"):
        caught = states[name]["Catch"][0]
        assert caught == {"ErrorEquals": ["DrainSuperseded"], "ResultPath": "$.superseded",
                          "Next": "RecordSuperseded"}, name  # fmt: skip
    record = states["RecordSuperseded"]
    assert record["Parameters"] == {"action": "record", "outcome": "superseded", "state.$": "$", **EXECUTION}
    assert record.get("End") is True and [c["Next"] for c in record["Catch"]] == ["MarkSuperseded"]
    assert _marked_then_counted(states, "MarkSuperseded", "superseded", "Superseded")["Next"] == "Superseded"
    assert states["Superseded"]["Type"] == "Pass" and states["Superseded"]["End"] is True
    assert states["Superseded"]["Parameters"]["outcome"] == "superseded"


def test_a_drain_its_validation_cancelled_ends_recorded_cancelled_and_succeeds() -> None:
    """Validation's ``cancelled`` answer (nothing touched) goes, before anything else, even a dry run, to
    a record step with outcome ``cancelled`` that ends the execution as a success: as a superseded
    drain's, no Fail state and no compensation is reachable from there."""
    states = _asl("drain_node.asl.json")["States"]
    assert states["Validate"]["Next"] == "IsWaiting" and states["IsWaiting"]["Default"] == "IsCancelled"
    choice = states["IsCancelled"]
    assert choice["Type"] == "Choice" and choice["Default"] == "IsDryRun"
    assert choice["Choices"] == [{"Variable": "$.cancelled", "IsPresent": True, "Next": "RecordCancelled"}]
    record = states["RecordCancelled"]
    assert record["Resource"] == "${DrainFunctionArn}"
    assert record["Parameters"] == {"action": "record", "outcome": "cancelled", "state.$": "$", **EXECUTION}
    assert record["ResultPath"] == "$" and record.get("End") is True
    assert [c["Next"] for c in record["Catch"]] == ["MarkCancelled"]
    assert _marked_then_counted(states, "MarkCancelled", "cancelled", "Cancelled")["Next"] == "Cancelled"
    fallback = states["Cancelled"]
    assert fallback["Type"] == "Pass" and fallback.get("End") is True
    assert fallback["Parameters"]["outcome"] == "cancelled"
    for key in CANCELLED_KEYS:  # the same fields as the record step's output
        assert fallback["Parameters"][f"{key}.$"] == f"$.cancelled.{key}", key
    assert "$.cancelled.note" in fallback["Parameters"]["note.$"]


def test_a_drain_answered_waiting_waits_until_not_before_then_validates_the_request_again() -> None:
    """Validation's ``waiting`` answer (not_before ahead, nothing read) goes to a Wait until that time,
    then back to Validate with the request as given; the execution's timeout covers the longest wait
    and the longest drain after it."""
    machine = _asl("drain_node.asl.json")
    states = machine["States"]
    assert states["IsWaiting"]["Choices"] == [
        {"Variable": "$.waiting", "IsPresent": True, "Next": "WaitUntilNotBefore"}
    ]
    wait = states["WaitUntilNotBefore"]
    assert (wait["Type"], wait["TimestampPath"], wait["Next"]) == ("Wait", "$.waiting.until", "Resume")
    resume = states["Resume"]
    assert (resume["Type"], resume["Parameters"], resume["Next"]) == (
        "Pass",
        {"request.$": "$.waiting.request"},
        "Validate",
    )
    assert machine["TimeoutSeconds"] == MAX_WAITING_EXECUTION_SECONDS <= 365 * 86_400


def _marked_then_counted(
    states: dict[str, Any], name: str, outcome: str | None, skip: str, *, expires: bool = True
) -> dict[str, Any]:
    """The state ``name`` marks the execution counted as the drain function does (``Drainer._counter``:
    the item named by the execution's ARN under ``<cluster>#drain-counted``, a claim's attributes), only
    where no mark is: the mark there (a record step's run counted) goes to ``skip``, counting nothing;
    any other failure counts all the same. Returns the count state it leads to. The mark expires
    (``expires_at``, DynamoDB's TTL) when the validation's clock gave its time (``expires``)."""
    mark = states[name]
    assert mark["Resource"] == "arn:aws:states:::dynamodb:putItem", name
    params = mark["Parameters"]
    assert params["TableName"] == "${StateTableName}"
    item = params["Item"]
    assert item["cluster"] == {"S": "${ClusterName}" + DRAIN_COUNTED_PARTITION.removeprefix("{cluster}")}
    assert item["item"] == {"S.$": "$$.Execution.Id"}
    if outcome is None:
        assert item["value"] == {"S.$": "States.JsonToString($.counted_by)"}
    else:
        assert json.loads(item["value"]["S"]) == {"by": "DrainNode", "outcome": outcome}, name
    if expires:
        assert item.pop("expires_at") == {"N.$": f"$.{COUNTED_EXPIRES_AT}"}, name
    assert set(item) == {"cluster", "item", "value"}, name
    assert (params["ConditionExpression"], params["ExpressionAttributeNames"]) == (
        "attribute_not_exists(#i)",
        {"#i": "item"},
    )
    assert mark["ResultPath"] is None  # the state the count and the output read is kept
    refused = "DynamoDB.ConditionalCheckFailedException"
    assert mark["Retry"][0] == {"ErrorEquals": [refused], "MaxAttempts": 0}  # no retry of a refusal
    existing, other = mark["Catch"]
    assert (existing["ErrorEquals"], existing["Next"]) == ([refused], skip), name
    count = mark["Next"]
    assert (other["ErrorEquals"], other["Next"]) == (["States.ALL"], count), name
    return states[count]  # type: ignore[no-any-return]


def test_a_drain_whose_record_step_fails_for_good_still_counts_its_outcome() -> None:
    """Every record step of a drain that succeeds (terminated, drained, released, superseded,
    cancelled) is caught, so a record step throttled past its retries ends the execution as the
    success it is; the path it takes then counts DrainOutcome under that outcome with CloudWatch's
    PutMetricData (the dimensions the drain function's EMF line has: service, Cluster, Outcome) before
    the Pass that shapes the output, and ends there whether or not the count succeeded; but only once
    it marked the execution counted, and straight to that Pass when a record step's run had."""
    states = _asl("drain_node.asl.json")["States"]
    records = {n: s for n, s in states.items() if s.get("Parameters", {}).get("action") == "record"}
    successes = {n: s["Parameters"]["outcome"] for n, s in records.items() if s.get("End")}
    assert sorted(successes.values()) == [
        "cancelled",
        "cancelled",
        "drained",
        "gone",
        "released",
        "superseded",
        "terminated",
    ]  # cancelled: at validation (RecordCancelled), and abandoned after the cordon (RecordAbandoned)
    for name, outcome in successes.items():
        [caught] = states[name]["Catch"]
        mark = states[caught["Next"]]
        count = _marked_then_counted(states, caught["Next"], outcome, mark["Catch"][0]["Next"])
        assert count["Resource"] == "arn:aws:states:::aws-sdk:cloudwatch:putMetricData", name
        [datum] = count["Parameters"]["MetricData"]
        assert count["Parameters"]["Namespace"] == "Spillway"
        assert (datum["MetricName"], datum["Value"], datum["Unit"]) == ("DrainOutcome", 1, "Count")
        assert datum["Dimensions"] == [
            {"Name": "service", "Value": "spillway"},
            {"Name": "Cluster", "Value": "${ClusterName}"},
            {"Name": "Outcome", "Value": outcome},
        ], name
        assert count["ResultPath"] is None  # the state the output Pass reads is kept
        end = count["Next"]
        assert [c["Next"] for c in count["Catch"]] == [end], name
        assert states[end]["Type"] == "Pass" and states[end].get("End") is True
        assert states[end]["Parameters"]["outcome"] == outcome


def test_a_failed_drain_whose_record_step_fails_for_good_still_counts_its_outcome() -> None:
    """The record steps of a failed drain (RecordFailure) and of a refused one (RecordRejection) are
    caught too, and the drain still fails as caught; on the way, DrainOutcome is counted with
    PutMetricData under the outcome the drain function gives the error (OUTCOME_OF_ERROR, else
    ``failed``), with the dimensions of its EMF line, so the drain-timeout alarm misses no timeout."""
    states = _asl("drain_node.asl.json")["States"]
    failures = [n for n, s in states.items() if s.get("Parameters", {}).get("action") == "record"]
    failures = [n for n in failures if states[n].get("Next") == "Fail"]
    assert sorted(failures) == ["RecordFailure", "RecordRejection"]
    for name in failures:
        [caught] = states[name]["Catch"]
        assert (caught["ErrorEquals"], caught["ResultPath"]) == (["States.ALL"], "$.record_error"), name
        assert caught["Next"] == "FailureOutcome", name
    choice = states["FailureOutcome"]
    picked: dict[str | None, dict[str, Any]] = {}
    for rule in choice["Choices"]:
        present, equals = rule["And"]
        assert present == {"Variable": "$.error.Error", "IsPresent": True}
        assert equals["Variable"] == "$.error.Error"
        picked[equals["StringEquals"]] = states[rule["Next"]]
    picked[None] = states[choice["Default"]]
    assert set(picked) == {*OUTCOME_OF_ERROR, None}
    for error, shaped in picked.items():
        assert shaped["Type"] == "Pass" and shaped["ResultPath"] == "$.counted_by"
        expected = OUTCOME_OF_ERROR[error] if error is not None else "failed"
        assert shaped["Result"] == {"by": "DrainNode", "outcome": expected}, error
        assert shaped["Next"] == "FailureMarkExpires"
    # a mark expires when the validation answered (its clock); RecordRejection's path may come without
    # that answer (the validation failed), and then writes the mark that is kept until deleted
    [expiring] = states["FailureMarkExpires"]["Choices"]
    assert expiring == {"Variable": f"$.{COUNTED_EXPIRES_AT}", "IsPresent": True, "Next": "MarkFailure"}
    assert states["FailureMarkExpires"]["Default"] == "MarkUnvalidatedFailure"
    count = _marked_then_counted(states, "MarkFailure", None, "FailAsCaught")
    kept = _marked_then_counted(states, "MarkUnvalidatedFailure", None, "FailAsCaught", expires=False)
    assert count is states["CountFailure"] and kept is count
    assert count["Resource"] == "arn:aws:states:::aws-sdk:cloudwatch:putMetricData"
    assert count["Parameters"]["Namespace"] == "Spillway"
    [datum] = count["Parameters"]["MetricData"]
    assert (datum["MetricName"], datum["Value"], datum["Unit"]) == ("DrainOutcome", 1, "Count")
    assert datum["Dimensions"] == [
        {"Name": "service", "Value": "spillway"},
        {"Name": "Cluster", "Value": "${ClusterName}"},
        {"Name": "Outcome", "Value.$": "$.counted_by.outcome"},
    ]
    assert count["ResultPath"] is None  # $.error, which the Fail state reads, is kept
    assert count["Next"] == "FailAsCaught" and [c["Next"] for c in count["Catch"]] == ["FailAsCaught"]
    assert states["FailAsCaught"] == {
        "Type": "Fail",
        "ErrorPath": "$.error.Error",
        "CausePath": "$.error.Cause",
    }


def test_every_terminating_drain_terminates_through_the_drain_function() -> None:
    """One terminate path, in every region and for every reason: the drain function, whose adapter maps
    Auto Scaling's errors to ours (AwsThrottled / AwsUnavailable retried here) and which drops the
    decrement AWS refuses at MinSize for a leaving instance. An aws-sdk task would see Auto Scaling's
    errors under names of its own (throttling as the service's base exception) and no MinSize rule."""
    states = _asl("drain_node.asl.json")["States"]
    assert not [n for n, s in states.items() if "aws-sdk:autoscaling" in s.get("Resource", "")]
    should = states["ShouldTerminate"]
    lifecycle, keep = should["Choices"]  # the group terminates it; or the drain keeps its node
    assert (lifecycle["Next"], keep["Next"]) == ("CompleteLifecycleAction", "ShouldUncordon")
    assert keep["Variable"] == "$.drain.terminate" and keep["BooleanEquals"] is False
    assert should["Default"] == "TerminateThroughFunction"
    terminate = states["TerminateThroughFunction"]
    assert terminate["Resource"] == "${DrainFunctionArn}"
    # the step's retry count: a first attempt that finds the instance gone did not terminate it itself
    assert terminate["Parameters"] == {
        "action": "terminate",
        "drain.$": "$.drain",
        "attempt.$": "$$.State.RetryCount",
        **EXECUTION,  # its own check stands by for another forced drain, as the check step does
    }
    assert terminate["ResultPath"] == "$.terminated"  # what the record step and Terminated read
    assert any({"AwsThrottled", "AwsUnavailable"} <= set(r["ErrorEquals"]) for r in terminate["Retry"])
    # its own check found the node not ready (a pod came since the check): back to the eviction rounds
    assert terminate["Next"] == "TerminatedNothing"
    [back] = states["TerminatedNothing"]["Choices"]
    assert back["Next"] == "WaitForPods"
    assert {"Variable": "$.terminated.ready", "BooleanEquals": False} in back["And"]
    assert (
        states["TerminatedNothing"]["Default"] == "LeftGroup"
    )  # a Spot warning's instance that left: drained
    [left] = states["LeftGroup"]["Choices"]
    assert left["Next"] == "RecordDrained" and "$.terminated.outside_group" in json.dumps(left)
    assert states["LeftGroup"]["Default"] == "CompleteOwnLifecycleAction"
    # nothing else reaches the terminate but the choice (and nothing terminates but this step)
    assert [n for n, s in states.items() if s.get("Next") == "TerminateThroughFunction"] == []
    assert [a for s in states.values() if s.get("Resource") == "${DrainFunctionArn}"
            for a in [s["Parameters"].get("action")] if a == "terminate"] == ["terminate"]  # fmt: skip


def test_scale_down_maps_drain_node_executions_with_bounded_concurrency() -> None:
    states = _asl("scale_down.asl.json")["States"]
    assert _targets(states) <= set(states)
    assert "${MaxDrainConcurrency}" in states["Settings"]["Parameters"]["max_concurrency.$"]
    each = states["DrainEach"]
    assert each["MaxConcurrencyPath"] == "$.max_concurrency"
    inner = each["ItemProcessor"]["States"]
    assert inner["DrainNode"]["Resource"] == "arn:aws:states:::states:startExecution.sync:2"
    # the optimized integration's name for StartExecution's quota error (no "Exception" suffix)
    retried = {e for r in inner["DrainNode"]["Retry"] for e in r["ErrorEquals"]}
    assert "StepFunctions.ExecutionLimitExceeded" in retried
    assert [c["Next"] for c in inner["DrainNode"]["Catch"]] == ["DrainFailed"]


def test_a_scale_down_part_drains_only_once_the_part_before_it_has_ended() -> None:
    """A plan's drains split over several executions (``after``: the previous part's execution ARN) run
    one part after another, so the plan drains at most MaxDrainConcurrency nodes at a time. A part
    polls the one before it while it runs (or waits to be redriven), a minute apart by default, and goes
    on once it ended or, after some retries for DescribeExecution's eventual consistency, when it does
    not exist."""
    states = _asl("scale_down.asl.json")["States"]
    assert _targets(states) <= set(states)
    assert states["Prepare"]["Next"] == "AfterPrevious"
    after = states["AfterPrevious"]
    assert after["Choices"][-1] == {"Variable": "$.plan.after", "IsPresent": True, "Next": "StartBudget"}
    assert after["Default"] == "Settings" and states["StartBudget"]["Next"] == "DescribePrevious"
    describe = states["DescribePrevious"]
    assert describe["Resource"] == "arn:aws:states:::aws-sdk:sfn:describeExecution"
    assert describe["Parameters"] == {"ExecutionArn.$": "$.plan.after"}
    missing = "Sfn.ExecutionDoesNotExistException"
    assert any(missing in r["ErrorEquals"] and r["MaxAttempts"] >= 3 for r in describe["Retry"])
    # throttling (any code the API does not model for the call) arrives as the service's base exception
    assert any("Sfn.SfnException" in r["ErrorEquals"] and r["MaxAttempts"] >= 3 for r in describe["Retry"])
    # missing past the grace: ended; any other error past the retries: unknowing, fails draining nothing
    assert [(c["ErrorEquals"], c["Next"]) for c in describe["Catch"]] == [
        ([missing], "Settings"),
        (["States.ALL"], "Unknown"),
    ]
    ended = states[describe["Next"]]
    running = {c["StringEquals"] for c in ended["Choices"][0]["Or"]}
    assert running == {"RUNNING", "PENDING_REDRIVE"}
    assert all(c["Variable"] == "$.previous.status" for c in ended["Choices"][0]["Or"])
    budget = states[ended["Choices"][0]["Next"]]  # no budget (null): waits as long as it runs
    assert budget["Choices"][0] == {"Variable": "$.polls_left", "IsNull": True, "Next": "WaitForPrevious"}
    wait = states["WaitForPrevious"]
    assert wait["Type"] == "Wait" and wait["SecondsPath"] == "$.plan.after_poll_seconds"
    assert states["Defaults"]["Result"]["after_poll_seconds"] == AFTER_POLL_SECONDS  # planning's budget
    assert states["Defaults"]["Result"]["after_poll_seconds"] >= 60  # the history's 25,000 events
    assert wait["Next"] == "DescribePrevious" and ended["Default"] == "Settings"
    # nothing reaches the drains but through Settings, which only the checks above lead to
    assert [n for n, s in states.items() if s.get("Next") == "DrainEach"] == ["Settings"]


def test_a_scale_down_part_whose_previous_part_was_stopped_drains_nothing() -> None:
    """An operator who stops a part of a split scale-down (StopExecution: ABORTED) wants the scale-down
    stopped, but the next part went on to drain as soon as it saw the stopped one had ended. A part
    after a stopped one now ends at once, draining nothing, and says so; so does a part after one
    that ended that way, so stopping any part stops every part after it. (Found by review.)"""
    states = _asl("scale_down.asl.json")["States"]
    ended = states["PreviousEnded"]
    by_status = {c["StringEquals"]: c["Next"] for c in ended["Choices"][1:]}
    assert all(c["Variable"] == "$.previous.status" for c in ended["Choices"][1:])
    assert by_status == {
        "ABORTED": "Stopped",
        "SUCCEEDED": "DescribePreviousOutput",
        "FAILED": "DescribeFailedPrevious",
    }
    assert ended["Default"] == "Settings"  # TIMED_OUT: drains, as before

    stopped = states["Stopped"]
    assert stopped["Type"] == "Pass" and stopped["Next"] == "CountUndrained"  # its metric, then the end
    assert stopped["Parameters"]["outcome"] == "skipped" and stopped["Parameters"]["drains"] == []
    assert stopped["Parameters"]["stopped.$"] == "$.plan.after"
    assert "was stopped" in stopped["Parameters"]["reason.$"]

    output = states["DescribePreviousOutput"]
    assert output["Resource"] == "arn:aws:states:::aws-sdk:sfn:describeExecution"
    assert output["Parameters"] == {"ExecutionArn.$": "$.plan.after"}
    assert output["ResultSelector"]["output.$"] == "States.StringToJson($.Output)"
    assert output["Next"] == "PreviousSkipped"
    # unreadable once retried: fails, draining nothing (tests/e2e/test_drain.py), not drains unseen
    assert [(c["ErrorEquals"], c["Next"]) for c in output["Catch"]] == [(["States.ALL"], "Unknown")]
    assert output["Retry"][0]["ErrorEquals"] == ["Sfn.SfnException"]
    unknown = states["Unknown"]
    assert (unknown["Type"], unknown["Error"]) == ("Fail", "PartBeforeUnknown")
    # a part that failed so leaves the part after it unknowing too; one that failed draining does not
    failed = states["DescribeFailedPrevious"]
    assert failed["Resource"] == output["Resource"] and failed["Parameters"] == output["Parameters"]
    assert failed["ResultSelector"]["error.$"] == "$.Error"
    assert [(c["ErrorEquals"], c["Next"]) for c in failed["Catch"]] == [(["States.ALL"], "Unknown")]
    unknowing = states[failed["Next"]]
    assert unknowing["Choices"] == [
        {"Variable": "$.previous.error", "StringEquals": "PartBeforeUnknown", "Next": "Unknown"}
    ]
    assert unknowing["Default"] == "Settings"
    skipped = states["PreviousSkipped"]
    assert skipped["Choices"][0] == {
        "Variable": "$.previous.output.stopped",
        "IsPresent": True,
        "Next": "StoppedBefore",
    }
    assert skipped["Default"] == "Settings"
    before = states["StoppedBefore"]
    assert before["Type"] == "Pass" and before["Next"] == "CountUndrained"
    assert before["Parameters"]["outcome"] == "skipped" and before["Parameters"]["drains"] == []
    assert before["Parameters"]["stopped.$"] == "$.previous.output.stopped"


def test_a_scale_down_part_stops_waiting_for_the_part_before_once_its_poll_budget_is_spent() -> None:
    """A part waited for the part before as long as that one ran, past the plan's claim on its nodes
    (drain_claim_minutes), then started a DrainNode execution per node only for its validation to
    cancel each. Given a poll_budget (planning: the claim's time left over after_poll_seconds), it
    counts its waits down with States.MathAdd (no timestamps: moto's Choice cannot compare Step
    Functions' own) and, finding the part before still running with none left, ends drained of nothing,
    saying which part still ran; the part after it skips the same way. A budget that is not a number
    fails the part before it looks at anything."""
    states = _asl("scale_down.asl.json")["States"]
    assert _targets(states) <= set(states)
    assert states["Defaults"]["Result"]["poll_budget"] is None  # a part started by hand: no limit
    bad = states["AfterPrevious"]["Choices"][0]
    assert {c["Variable"] for c in bad["And"]} == {"$.plan.poll_budget"}
    assert {(k, v) for c in bad["And"] for k, v in c.items() if k != "Variable"} == {
        ("IsNull", False),
        ("IsNumeric", False),
    }
    fail = states[bad["Next"]]
    assert fail["Type"] == "Fail" and fail["Error"] == "InputError" and "poll_budget" in fail["Cause"]
    assert states["StartBudget"]["Parameters"] == {"plan.$": "$.plan", "polls_left.$": "$.plan.poll_budget"}

    left = states["PollBudgetLeft"]
    spent = left["Choices"][1]
    assert spent == {"Variable": "$.polls_left", "NumericLessThanEquals": 0, "Next": "ClaimLapsed"}
    count = states[left["Default"]]
    assert count["Type"] == "Pass" and count["Next"] == "WaitForPrevious"
    assert count["Parameters"] == {"plan.$": "$.plan", "polls_left.$": "States.MathAdd($.polls_left, -1)"}

    for name, behind in (
        ("ClaimLapsed", "$.plan.after"),
        ("LapsedBefore", "$.previous.output.lapsed_behind"),
    ):
        lapsed = states[name]
        assert lapsed["Type"] == "Pass" and lapsed["Next"] == "CountUndrained"  # its metric, then the end
        params = lapsed["Parameters"]
        # lapsed, not skipped: skipped says a part before was stopped; this part's claim lapsed behind one
        assert (
            params["outcome"] == "lapsed" and params["drains"] == [] and params["lapsed_behind.$"] == behind
        )
        assert "stopped.$" not in params
        assert "drain_claim_minutes" in params["reason.$"] and "next plan judges" in params["reason.$"]
    after_lapsed = states["PreviousSkipped"]["Choices"][1]
    assert after_lapsed == {
        "Variable": "$.previous.output.lapsed_behind",
        "IsPresent": True,
        "Next": "LapsedBefore",
    }


def test_a_planned_drain_leaves_a_node_that_gained_work_since_the_plan(rig: Rig) -> None:
    rig.api.add(objects.daemonset_pod("aws-node-x", NODE))
    rig.pod("late-job")
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "plan_id": "20261102T100000Z-abc"})
    assert "runs 1 workload pod" in cancelled(out)["note"]
    assert cancelled(out) | {"note": ""} == {"node": NODE, "instance_id": INSTANCE, "group": "general",
                                             "region": "us-east-1", "plan_id": "20261102T100000Z-abc",
                                             "reason": "a plan's scale-down", "note": ""}  # fmt: skip
    assert rig.writes() == [] and rig.outcomes == []  # counted once, by the record step

    # The same node, asked for by an operator (no plan), is drained: eviction is the point.
    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE})
    assert out["preview"]["would_evict"] == ["team-a/late-job"]


def cancelled(validated: dict[str, Any]) -> dict[str, Any]:
    """A validation's answer for a drain it cancelled: only ``cancelled`` (no drain, nothing to do)."""
    assert set(validated) == {"cancelled"}, validated
    found: dict[str, Any] = validated["cancelled"]
    return found


def test_a_drain_cancelled_at_validation_is_recorded_as_a_success_counted_once(rig: Rig) -> None:
    """Nothing was touched: the record step's outcome is ``cancelled`` with the reason as its note (no
    error, no cause: the execution succeeds), no event on the node, and DrainOutcome once."""
    rig.pod("late-job")
    rig.api.clear_requests()
    plan = "20261102T100000Z-abc"
    state = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "plan_id": plan, "reason": "idle 12 min"})

    out = run_action(rig.drainer, {"action": "record", "outcome": "cancelled", "state": state})

    assert {k: out[k] for k in ("outcome", "node", "instance_id", "group", "region", "plan_id", "reason")} == {
        "outcome": "cancelled", "node": NODE, "instance_id": INSTANCE, "group": "general",
        "region": "us-east-1", "plan_id": plan, "reason": "idle 12 min"}  # fmt: skip
    assert "runs 1 workload pod" in out["note"] and "error" not in out and "cause" not in out
    assert rig.outcomes == [("cancelled", NODE)]  # the log line names the node, as the metric's output does
    assert rig.writes() == []  # not even an Event: the drain never touched the node
    line = summarize(CLUSTER, plan, [{"execution": "arn:x:drain-1", "output": out}])["drains"][0]
    assert (line["outcome"], line["note"], line["instance_id"]) == ("cancelled", out["note"], INSTANCE)


def test_validation_never_fails_a_drain_it_cancels(rig: Rig) -> None:
    """A cancellation at validation is an answer, not an error: no Lambda error (the drain function's
    Errors alarm) and no failed execution (the DrainNode failures alarm) for normal operation."""
    assert DrainCancelled not in RAISES["validate"]
    with pytest.raises(InvalidDrainRequest, match="record"):
        rig.drainer.record({"cancelled": "soon"}, "cancelled")


# --- not_before: a drain that waits before it starts ------------------------------------------------

SCHEDULED = {"cluster": CLUSTER, "node": NODE, "force": True, "leaving": True, "notice": "scheduled",
             "deadline_seconds": 86_400, "poll_seconds": 108, "reason": "scheduled change arn:x"}  # fmt: skip


def test_a_drain_not_before_a_later_time_waits_for_it_reading_and_touching_nothing(rig: Rig) -> None:
    """A scheduled change's forced drain is started with the notice, days before the change's last day
    (spillway.act.interrupt.forced_later): validation answers ``waiting``, with the request as given,
    which DrainNode waits out before validating it again, so that the node is judged (protections,
    group, instance) as it is when the drain starts, not weeks earlier."""
    request = {**SCHEDULED, "not_before": "2026-11-16T10:00:00Z"}
    out = rig.drainer.validate(request)
    assert out == {"waiting": {"until": "2026-11-16T10:00:00Z", "request": request}}
    assert _reads_and_writes(rig) == [] and rig.cloud.calls == []
    rig.clock.now = datetime(2026, 11, 16, 10, 0, 0, 500_000, tzinfo=UTC)  # the Wait ended at the second
    again = rig.drainer.validate(request)
    assert again["drain"]["node"] == NODE and again["drain"]["force"] is True


@pytest.mark.parametrize(
    ("not_before", "words"),
    [
        ("2026-11-16T10:00:00+00:00", "uppercase T and Z, no offset"),  # the Wait refuses an offset
        ("2026-11-16t10:00:00z", "uppercase T and Z"),
        ("2026-11-16", "uppercase T and Z"),
        ("2026-13-16T10:00:00Z", "such as 2026-11-02T10:20:00Z"),
        ("2027-11-02T10:00:00Z", "more than 360 days after 2026-11-02T10:00:00Z"),
    ],
)
def test_a_not_before_the_wait_state_cannot_take_is_refused_naming_the_field(
    rig: Rig, not_before: str, words: str
) -> None:
    """Step Functions' Wait takes RFC 3339 with an uppercase T and Z and no offset (Amazon States
    Language, Wait state); any other form failed the execution at the Wait with no field named. A
    Standard execution runs at most a year: a wait past MAX_WAIT_SECONDS is refused at once too."""
    with pytest.raises(InvalidDrainRequest, match=re.escape(words)) as err:
        rig.drainer.validate({**SCHEDULED, "not_before": not_before})
    assert err.value.field == "not_before"
    assert rig.writes() == []


def test_a_lifecycle_drain_never_waits(rig: Rig) -> None:
    lifecycle = {"hook": "drain-before-terminate", "token": "5f3c2a1b-0d4e-4f6a-9b8c-7d6e5f4a3b2c",
                 "heartbeat_seconds": 300}  # fmt: skip
    with pytest.raises(InvalidDrainRequest, match="HeartbeatTimeout") as err:
        rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "lifecycle": lifecycle, "force": True, "group": "general",
                              "terminate": False, "not_before": "2026-11-02T10:05:00Z"})  # fmt: skip
    assert err.value.field == "not_before"


BY_HAND_LATER = {"cluster": CLUSTER, "node": NODE, "not_before": "2026-11-16T10:00:00Z"}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"node": "ip-10-0-1-99.ec2.internal"}, "node", "no Node named"),  # a typo in the node's name
        ({"instance_id": SPARE_INSTANCE}, "instance_id", SPARE_INSTANCE),
        ({"group": "gpu"}, "group", "gpu"),
    ],
)
def test_a_drain_by_hand_that_waits_is_refused_at_once_for_what_it_would_be_refused_without_waiting(
    rig: Rig, change: dict[str, Any], field: str, words: str
) -> None:
    """README: a bad request fails at once with InvalidDrainRequest naming the field. A drain by hand
    with ``not_before`` was judged only when its wait ended, up to 360 days later, so a typo in the
    node's name was told the operator only then, long after the maintenance it was for."""
    with pytest.raises(InvalidDrainRequest, match=re.escape(words)) as err:
        rig.drainer.validate({**BY_HAND_LATER, **change})
    assert err.value.field == field
    assert rig.writes() == []


def test_a_drain_by_hand_that_waits_is_judged_again_when_its_wait_ends(rig: Rig) -> None:
    """Valid when started, the drain waits, touching nothing; when it wakes the node is judged as it is
    then: one somebody marked scale-down-disabled meanwhile is refused, naming the field, as without
    ``not_before``."""
    assert rig.drainer.validate(BY_HAND_LATER) == {
        "waiting": {"until": "2026-11-16T10:00:00Z", "request": BY_HAND_LATER}
    }
    assert rig.writes() == []
    _scale_down_disabled(rig)
    rig.clock.now = datetime(2026, 11, 16, 10, 0, 0, tzinfo=UTC)
    with pytest.raises(InvalidDrainRequest, match="scale-down-disabled"):
        rig.drainer.validate(BY_HAND_LATER)
    assert rig.writes() == []


# --- a scheduled change's forced drain, its wait over: what EC2 says of the change now -------------

# The forced drain of a retirement announced for 3 Nov 10:05 wakes a day before it less the margin (T0).
CHANGE = {**SCHEDULED, "instance_id": INSTANCE, "region": "us-east-1", "not_before": "2026-11-02T10:00:00Z",
          "scheduled_start": "2026-11-03T10:05:00Z", "event_code": "instance-retirement"}  # fmt: skip
RETIREMENT = {"InstanceEventId": "instance-event-0d59937288b749b32", "Code": "instance-retirement",
              "Description": "The instance is running on degraded hardware",
              "NotBefore": datetime(2026, 11, 3, 10, 5, tzinfo=UTC),
              "NotBeforeDeadline": datetime(2026, 11, 20, 10, 5, tzinfo=UTC)}  # fmt: skip


def _untouched(rig: Rig) -> None:
    node = rig.api.get("Node", NODE)
    assert not node["spec"].get("unschedulable") and rig.writes() == []


@pytest.mark.parametrize(
    "events",
    [
        [{**RETIREMENT, "Description": "[Canceled] The instance is running on degraded hardware"}],
        [{**RETIREMENT, "Description": "[Completed] The instance is running on degraded hardware"}],
        [],  # EC2 lists none: a week after it completed, or never scheduled
    ],
    ids=["canceled", "completed", "none"],
)
def test_a_forced_drain_for_a_change_ec2_no_longer_lists_ends_cancelled_touching_nothing(
    rig: Rig, events: list[dict[str, Any]]
) -> None:
    """A change AWS canceled, or one that completed early (a stop and start moves the instance to other
    hardware), is over: EC2 DescribeInstanceStatus prefixes its Description with "[Canceled]" or
    "[Completed]" (EC2 API reference, InstanceStatusEvent). The forced drain that waited for its last day
    drained the node anyway and, at its deadline, deleted the pods a budget held, on an instance AWS no
    longer retired. Now it ends ``cancelled`` (a success, no alarm), saying why."""
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = events
    out = rig.drainer.validate(CHANGE)
    assert set(out) == {"cancelled"}
    assert "canceled or is done" in out["cancelled"]["note"] and INSTANCE in out["cancelled"]["note"]
    assert ("scheduled_events", ("us-east-1", INSTANCE)) in rig.cloud.calls
    _untouched(rig)


def test_a_forced_drain_follows_only_live_events_of_the_instance(rig: Rig) -> None:
    """A canceled retirement beside a system reboot still to come: the instance still has a change
    ahead, so the drain goes on (for the reboot, the one EC2 still lists)."""
    reboot = {**RETIREMENT, "Code": "system-reboot", "InstanceEventId": "instance-event-1",
              "Description": "The instance is scheduled for a reboot"}  # fmt: skip
    rig.cloud.instance_events[INSTANCE] = [{**RETIREMENT, "Description": "[Canceled] gone"}, reboot]
    out = rig.drainer.validate(CHANGE)
    assert out["drain"]["force"] is True and out["drain"]["deadline_seconds"] == 86_400
    assert ("scheduled_events", ("us-east-1", INSTANCE)) in rig.cloud.calls


def test_a_forced_drain_for_a_change_at_its_announced_start_drains_as_planned(rig: Rig) -> None:
    """EC2 lists the change as announced: the drain asked, and goes on unchanged."""
    rig.cloud.instance_events[INSTANCE] = [RETIREMENT]
    out = rig.drainer.validate(CHANGE)
    assert ("scheduled_events", ("us-east-1", INSTANCE)) in rig.cloud.calls
    drain = out["drain"]
    assert (drain["force"], drain["deadline_seconds"], drain["reason"]) == (True, 86_400, SCHEDULED["reason"])
    assert drain["deadline_at"] == "2026-11-03T10:00:00Z"  # the start less the margin


def test_a_forced_drain_for_a_change_moved_later_waits_again_until_the_new_last_day(rig: Rig) -> None:
    """The customer moved the retirement two days later (EC2 ModifyInstanceEventStartTime, up to the
    event's NotBeforeDeadline: user guide, "Reschedule a scheduled event"). The drain that waited for
    the old start forced the node out then, two days early, killing pods a budget held for nothing. Now
    it waits again, as much longer (the same Wait loop: validation's ``waiting`` answer, its request's
    not_before and scheduled_start moved), and drains on the new last day with the same day-long
    deadline, so it ends before the new start less the margin."""
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = [
        {**RETIREMENT, "NotBefore": datetime(2026, 11, 5, 10, 5, tzinfo=UTC)}
    ]
    out = rig.drainer.validate(CHANGE)
    moved = {**CHANGE, "not_before": "2026-11-04T10:00:00Z", "scheduled_start": "2026-11-05T10:05:00Z"}
    assert out["waiting"]["until"] == "2026-11-04T10:00:00Z" and out["waiting"]["request"] == moved
    assert "2026-11-05T10:05:00Z" in out["waiting"]["note"]
    _untouched(rig)

    rig.clock.now = datetime(2026, 11, 4, 10, 0, tzinfo=UTC)
    again = rig.drainer.validate(out["waiting"]["request"])
    assert again["drain"]["deadline_at"] == "2026-11-05T10:00:00Z" and again["drain"]["force"] is True


def test_a_forced_drain_for_a_change_moved_earlier_ends_by_the_new_start(rig: Rig) -> None:
    """Moved six hours earlier: the drain goes on now, its deadline six hours shorter, so that the pods
    are out before EC2 takes the instance (the update's own forced drain may be on its way as well)."""
    rig.cloud.instance_events[INSTANCE] = [
        {**RETIREMENT, "NotBefore": datetime(2026, 11, 3, 4, 5, tzinfo=UTC)}
    ]
    out = rig.drainer.validate(CHANGE)
    assert out["drain"]["deadline_at"] == "2026-11-03T04:00:00Z"
    assert "from 2026-11-03T10:05:00Z to 2026-11-03T04:05:00Z" in out["drain"]["reason"]


def test_a_forced_drain_that_cannot_read_ec2_drains_as_planned_and_says_so(rig: Rig) -> None:
    """EC2 out of reach after the SDK's retries: the drain cannot tell a canceled change from one that
    stands, and AWS retiring the instance with its pods on it is worse than a drain it no longer needed,
    so it drains as planned, its reason saying EC2 was not read."""
    rig.cloud.fail(
        "scheduled_events", AwsUnavailable("DescribeInstanceStatus(us-east-1): ServiceUnavailable")
    )
    out = rig.drainer.validate(CHANGE)
    assert out["drain"]["force"] is True and out["drain"]["deadline_seconds"] == 86_400
    assert (
        "scheduled events unread" in out["drain"]["reason"] and "drained as planned" in out["drain"]["reason"]
    )


# The retirement moved two days later (3 Nov to 5 Nov 10:05): the forced drain of the old start
# waited on (above), and the one AWS Health's update started for the new start waited for it too.
MOVED = {**RETIREMENT, "NotBefore": datetime(2026, 11, 5, 10, 5, tzinfo=UTC)}
# Or AWS canceled it and scheduled a new retirement for 5 Nov, another event of the instance.
REPLACED = [{**RETIREMENT, "Description": "[Canceled] The instance is running on degraded hardware"},
            {**MOVED, "InstanceEventId": "instance-event-0a11bd4c6e7f80912"}]  # fmt: skip
OLD_START_FORCE = f"scheduled-{INSTANCE}-1111111111-force"
NEW_START_FORCE = f"scheduled-{INSTANCE}-2222222222-force"
NEW_START = {**CHANGE, "not_before": "2026-11-04T10:00:00Z", "scheduled_start": "2026-11-05T10:05:00Z"}


def _woken(rig: Rig, request: dict[str, Any], name: str) -> Drain:
    """A scheduled change's forced drain validated as DrainNode does once its wait is over."""
    out = rig.drainer.validate(request, execution=name)
    while "waiting" in out:
        rig.clock.now = max(rig.clock.now, datetime.fromisoformat(out["waiting"]["until"]))
        out = rig.drainer.validate(out["waiting"]["request"], execution=name)
    return Drain.model_validate(out["drain"])


@pytest.mark.parametrize("events", [[MOVED], REPLACED], ids=["moved", "replaced"])
def test_two_forced_drains_of_one_moved_change_drain_once_the_other_stops_superseded(
    rig: Rig, events: list[dict[str, Any]]
) -> None:
    """A change moved later (EC2 ModifyInstanceEventStartTime), or canceled and replaced by a new event
    of the instance with a later start, and announced again: AWS Health's notice with the new start
    started a forced drain named after it, and the forced drain of the old start, woken, found the
    event it follows (the live one of its code: the new one once the old is canceled) starting later
    and waited for the new last day as well. Both woke together, followed the same EC2 event, and both
    drained side by side to the same deadline: the second's cordon took the node over, but a forced
    drain was never superseded, so both force-evicted at the deadline and both reached
    TerminateInstanceInAutoScalingGroup with the decrement at once. Now each cordon names the event its
    forced drain follows; the first to cordon holds the node, the other's cordon leaves it and that
    drain stops at its next step, ``superseded`` (nothing undone), the first alone draining and
    terminating."""
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = events
    followed = events[-1]["InstanceEventId"]
    old = _woken(rig, CHANGE, OLD_START_FORCE)
    new = _woken(rig, NEW_START, NEW_START_FORCE)
    assert rig.clock.now == datetime(2026, 11, 4, 10, 0, tzinfo=UTC)  # the new start's last day
    assert (old.deadline_at, new.deadline_at) == ("2026-11-05T10:00:00Z", "2026-11-05T10:00:00Z")
    assert (old.scheduled_event, new.scheduled_event) == (followed, followed)
    rig.drainer.cordon(old)  # first: it holds the node
    assert OLD_START_FORCE in rig.drainer.cordon(new)["standing_by"]

    with pytest.raises(DrainSuperseded, match=OLD_START_FORCE):
        rig.drainer.evict(new)
    assert rig.drainer.evict(old)["evicted"] == ["team-a/web-0"]
    cordon = rig.node()["metadata"]["annotations"]["spillway.io/cordoned"]
    assert f"{OLD_START_FORCE} for {followed}: " in cordon


MACHINE = "arn:aws:states:us-east-1:123456789012:execution:spillway-ml-drain-node"


def _overtaken(rig: Rig) -> tuple[Drain, Drain, str]:
    """Two forced drains following one moved EC2 event, both through their cordon step, the new start's
    first (it holds the node; the old one's cordon left it); the old one and its own execution ARN, to
    stand by."""
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = [MOVED]
    old = _woken(rig, CHANGE, OLD_START_FORCE)
    new = _woken(rig, NEW_START, NEW_START_FORCE)
    rig.drainer.cordon(new)
    rig.drainer.cordon(old)
    return old, new, f"{MACHINE}:{OLD_START_FORCE}"


@pytest.mark.parametrize("ended", ["FAILED", "ABORTED", "TIMED_OUT", "MISSING"])
def test_a_forced_drain_superseded_by_one_of_the_same_event_takes_the_node_over_when_that_one_fails(
    rig: Rig, ended: str
) -> None:
    """Of two forced drains following one EC2 event, the one that found the other's cordon stopped
    superseded at once; when the other then failed (a forced drain that fails keeps its cordon, and
    leaves the pods it had not evicted), or was stopped, nobody drained for the event, and EC2 retired
    the instance with those pods on it. Now the one overtaken stands by, evicting nothing, while the
    other's execution runs (DescribeExecution), and takes the node over once it ended without
    succeeding."""
    statuses = {f"{MACHINE}:{NEW_START_FORCE}": "RUNNING"}
    rig.drainer.executions = statuses.__getitem__
    old, new, own = _overtaken(rig)

    standing = rig.drainer.evict(old, execution=own)
    assert standing["done"] is False and standing["evicted"] == []
    assert NEW_START_FORCE in standing["standing_by"]
    assert rig.drainer.check(old, execution=own)["ready"] is False
    statuses[f"{MACHINE}:{NEW_START_FORCE}"] = "PENDING_REDRIVE"  # redriven: it runs again
    assert rig.drainer.evict(old, execution=own)["evicted"] == []
    assert rig.api.get("Pod", "web-0", "team-a") is not None

    statuses[f"{MACHINE}:{NEW_START_FORCE}"] = ended  # the holder failed, its cordon left on the node
    assert rig.drainer.evict(old, execution=own)["evicted"] == ["team-a/web-0"]
    cordon = rig.node()["metadata"]["annotations"]["spillway.io/cordoned"]
    assert f"{OLD_START_FORCE} for {MOVED['InstanceEventId']}: " in cordon
    with pytest.raises(DrainSuperseded, match=OLD_START_FORCE):  # the other, were it still running
        rig.drainer.evict(new)


def test_a_forced_drain_superseded_by_one_of_the_same_event_that_succeeded_stops(rig: Rig) -> None:
    """The drain holding the node ended well (it drained, terminated): the one standing by stops
    superseded, undoing nothing; a status it cannot read keeps it standing by."""
    statuses: dict[str, str] = {}

    def status(arn: str) -> str:
        if arn not in statuses:
            raise AwsThrottled("DescribeExecution: Rate exceeded")
        return statuses[arn]

    rig.drainer.executions = status
    old, _, own = _overtaken(rig)
    assert "could not be read" in rig.drainer.evict(old, execution=own)["note"]

    statuses[f"{MACHINE}:{NEW_START_FORCE}"] = "SUCCEEDED"
    with pytest.raises(DrainSuperseded, match=NEW_START_FORCE):
        rig.drainer.evict(old, execution=own)
    with pytest.raises(DrainSuperseded, match=NEW_START_FORCE):
        rig.drainer.check(old, execution=own)
    assert NEW_START_FORCE in rig.node()["metadata"]["annotations"]["spillway.io/cordoned"]


def test_a_forced_drain_standing_by_whose_node_the_other_terminated_ends_superseded(rig: Rig) -> None:
    """The drain holding the node terminated it and deleted the Node: the one standing by does not
    take that for its own drain's end (recorded terminated, a second time), but stands by while the
    other still runs and stops superseded once it succeeded."""
    statuses = {f"{MACHINE}:{NEW_START_FORCE}": "RUNNING"}
    rig.drainer.executions = statuses.__getitem__
    old, _, own = _overtaken(rig)
    standing = rig.drainer.evict(old, execution=own)
    rig.api.delete("Node", NODE)

    assert "standing_by" in rig.drainer.evict(old, standing, execution=own)
    statuses[f"{MACHINE}:{NEW_START_FORCE}"] = "SUCCEEDED"
    with pytest.raises(DrainSuperseded, match=NEW_START_FORCE):
        rig.drainer.evict(old, standing, execution=own)


def test_a_forced_drain_cordoning_a_node_the_same_event_s_drain_holds_leaves_its_cordon(rig: Rig) -> None:
    """Two forced drains of one EC2 event woke together; the later cordon took the node over while the
    drain it took it from had already made its last check before terminating, so that one never saw
    the hand-over: both terminated (an e2e run under load did). Now the cordon step of the later
    leaves the first's cordon and its time as they are, writes no taint, and names the holder in
    ``standing_by``: it stands by from there. A forced drain of another event still takes it over."""
    statuses = {f"{MACHINE}:{OLD_START_FORCE}": "RUNNING"}
    rig.drainer.executions = statuses.__getitem__
    rig.pod("web-0")
    reboot_event = {**MOVED, "Code": "system-reboot", "InstanceEventId": "instance-event-2",
                    "Description": "The instance is scheduled for a reboot"}  # fmt: skip
    rig.cloud.instance_events[INSTANCE] = [MOVED, reboot_event]
    old = _woken(rig, CHANGE, OLD_START_FORCE)
    new = _woken(rig, NEW_START, NEW_START_FORCE)
    assert rig.drainer.cordon(old)["standing_by"] is None
    held = rig.node()["metadata"]["annotations"]["spillway.io/cordoned"]
    rig.clock.now += timedelta(minutes=3)

    cordoned = rig.drainer.cordon(new)
    assert (cordoned["cordoned"], cordoned["tainted"]) == (False, False)
    assert held.split(" ", 1)[1] == cordoned["standing_by"]
    assert rig.node()["metadata"]["annotations"]["spillway.io/cordoned"] == held
    own = f"{MACHINE}:{NEW_START_FORCE}"
    assert OLD_START_FORCE in rig.drainer.evict(new, execution=own)["standing_by"]
    assert rig.api.get("Pod", "web-0", "team-a") is not None

    reboot = _woken(rig, {**NEW_START, "event_code": "system-reboot"}, "scheduled-reboot-force")
    assert reboot.scheduled_event == "instance-event-2"  # another event of the instance
    assert rig.drainer.cordon(reboot)["standing_by"] is None
    assert "scheduled-reboot-force" in rig.node()["metadata"]["annotations"]["spillway.io/cordoned"]


def _first_round(cordoned: dict[str, Any]) -> dict[str, Any]:
    """The previous round of a drain's first eviction round, as DrainNode's StartEvicting builds it from
    the Cordon step's result (``$.cordon``)."""
    parameters = _asl("drain_node.asl.json")["States"]["StartEvicting"]["Parameters"]
    state: dict[str, Any] = {"cordon": cordoned}
    built: dict[str, Any] = {}
    for key, value in parameters.items():
        if not key.endswith(".$"):
            built[key] = value
            continue
        found: Any = state
        for part in value.removeprefix("$.").split("."):
            found = found[part]
        built[key.removesuffix(".$")] = found
    return built


@pytest.mark.parametrize("holder", ["RUNNING", "SUCCEEDED"])
def test_a_forced_drain_standing_by_from_its_cordon_whose_node_is_gone_at_its_first_round_terminates_nothing(
    rig: Rig, holder: str
) -> None:
    """The drain holding the node terminated it and deleted the Node before the one that stood by from
    its cordon step had its first eviction round: a leaving instance's Node gone is a done round, so
    that one went on to terminate too, recorded terminated a second time. DrainNode carries the cordon
    step's ``standing_by`` into the first round, which stands by while the holder runs and stops
    superseded once it succeeded."""
    statuses = {f"{MACHINE}:{NEW_START_FORCE}": holder}
    rig.drainer.executions = statuses.__getitem__
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = [MOVED]
    old = _woken(rig, CHANGE, OLD_START_FORCE)
    new = _woken(rig, NEW_START, NEW_START_FORCE)
    rig.drainer.cordon(new)
    first = _first_round(rig.drainer.cordon(old))
    rig.api.delete("Node", NODE)
    own = f"{MACHINE}:{OLD_START_FORCE}"

    if holder == "RUNNING":
        standing = rig.drainer.evict(old, first, execution=own)
        assert standing["done"] is False and NEW_START_FORCE in standing["standing_by"]
    else:
        with pytest.raises(DrainSuperseded, match=NEW_START_FORCE):
            rig.drainer.evict(old, first, execution=own)
    assert _first_round(rig.drainer.cordon(new))["standing_by"] is None  # the gone Node's own answer


def test_the_forced_drain_of_a_change_moved_into_its_last_day_and_the_waiting_one_drain_once(
    rig: Rig,
) -> None:
    """The retirement moved earlier, to 3 Nov 04:05, within a day: AWS Health's update started a forced
    drain at once (no not_before, as the interrupt function builds it), and the forced drain of the old
    start, woken at 2 Nov 10:00, finds the event starting six hours earlier and drains to the same end.
    Both read EC2's events and name the event they follow, so the one that finds the other's cordon
    does not drain beside it."""
    earlier = {**RETIREMENT, "NotBefore": datetime(2026, 11, 3, 4, 5, tzinfo=UTC)}
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = [earlier]
    within = {**SCHEDULED, "instance_id": INSTANCE, "region": "us-east-1", "deadline_seconds": 64_800,
              "scheduled_start": "2026-11-03T04:05:00Z", "event_code": "instance-retirement"}  # fmt: skip
    old = _woken(rig, CHANGE, OLD_START_FORCE)
    new = _woken(rig, within, NEW_START_FORCE)
    assert (old.deadline_at, new.deadline_at) == ("2026-11-03T04:00:00Z", "2026-11-03T04:00:00Z")
    assert old.scheduled_event == new.scheduled_event == RETIREMENT["InstanceEventId"]
    rig.drainer.cordon(new)
    rig.drainer.cordon(old)

    with pytest.raises(DrainSuperseded, match=NEW_START_FORCE):
        rig.drainer.evict(old)
    assert rig.drainer.evict(new)["evicted"] == ["team-a/web-0"]


def test_forced_drains_of_different_events_of_one_instance_both_go_on(rig: Rig) -> None:
    """Two changes of one instance (a retirement, and a system reboot the same day): each forced drain
    follows its own event, so neither stops for the other; nor does a forced drain that read no event."""
    reboot = {**RETIREMENT, "Code": "system-reboot", "InstanceEventId": "instance-event-2",
              "Description": "The instance is scheduled for a reboot"}  # fmt: skip
    rig.pod("web-0")
    rig.cloud.instance_events[INSTANCE] = [RETIREMENT, reboot]
    retirement = _woken(rig, CHANGE, OLD_START_FORCE)
    rebooting = _woken(rig, {**CHANGE, "event_code": "system-reboot"}, NEW_START_FORCE)
    unread = _woken(rig, {**SCHEDULED, "instance_id": INSTANCE, "region": "us-east-1"}, "interrupt-x")
    assert (retirement.scheduled_event, rebooting.scheduled_event, unread.scheduled_event) == (
        RETIREMENT["InstanceEventId"], "instance-event-2", None)  # fmt: skip
    for drain in (retirement, rebooting, unread):
        rig.drainer.cordon(drain)

    for drain in (retirement, rebooting, unread):
        assert "evicted" in rig.drainer.evict(drain)


def test_a_drain_without_a_scheduled_start_reads_no_scheduled_event(rig: Rig) -> None:
    rig.drainer.validate({**SCHEDULED, "instance_id": INSTANCE, "region": "us-east-1"})
    assert not [c for c in rig.cloud.calls if c[0] == "scheduled_events"]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"scheduled_start": "2026-11-03T10:05:00+00:00"}, "scheduled_start", "such as 2026-11-03T10:20:00Z"),
        ({"instance_id": None}, "scheduled_start", "needs instance_id and region"),
        ({"event_code": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}, "event_code", "instance-retirement"),
    ],
)
def test_a_scheduled_change_the_drain_cannot_read_is_refused_naming_the_field(
    rig: Rig, change: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidDrainRequest, match=re.escape(words)) as err:
        rig.drainer.validate({k: v for k, v in {**CHANGE, **change}.items() if v is not None})
    assert err.value.field == field
    assert rig.writes() == []


# --- the plan's claim on the node: a drain that starts after it lapsed --------------------------------

# A plan made at T0 - 19 min whose claim (drain_claim_minutes 20) lapses at T0 + 1 min, as
# act.planning.claim_fields writes it into every drain item of the scale-down.
CLAIM = {"plan_id": "20261102T094100Z-abc", "planned_at": "2026-11-02T09:41:00Z", "claim_minutes": 20,
         "claim_until": "2026-11-02T10:01:00Z"}  # fmt: skip


def _reads_and_writes(rig: Rig) -> list[str]:
    return [f"{r.method} {r.path}" for r in rig.api.requests]


def test_a_planned_drain_that_starts_within_its_plans_claim_goes_on(rig: Rig) -> None:
    rig.clock.advance(59.999)  # one millisecond before claim_until
    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **CLAIM})
    assert out["drain"]["node"] == NODE and out["preview"]["outcome"] == "dry_run"


@pytest.mark.parametrize("late", [60, 60.001, 3600])  # at claim_until exactly (as the planner counts), after
def test_a_planned_drain_that_starts_once_its_plans_claim_lapsed_is_cancelled_touching_nothing(
    rig: Rig, late: float
) -> None:
    """A drain queued behind others (MaxDrainConcurrency, or a part waiting for the part before) that
    starts once its plan's claim on the node lapsed: later plans judge the node again (it is not
    cordoned yet), and a consolidation's premise is as old. Cancelled before anything is read or
    written, saying when the plan was made and for how long it claimed the node."""
    rig.clock.advance(late)
    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **CLAIM, **consolidation()})
    words = cancelled(out)["note"]
    for named in ("2026-11-02T09:41:00Z", "drain_claim_minutes (20)", "2026-11-02T10:01:00Z",
                  NODE, "the next plan judges the node again"):  # fmt: skip
        assert named in words, words
    assert _reads_and_writes(rig) == [] and rig.cloud.calls == []
    assert rig.node()["spec"].get("unschedulable") is None


def test_a_drain_with_only_claim_until_says_when_its_claim_lapsed(rig: Rig) -> None:
    rig.clock.advance(61)
    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, "claim_until": CLAIM["claim_until"]})
    assert re.search(
        r"lapsed at 2026-11-02T10:01:00Z.*next plan judges the node again", cancelled(out)["note"]
    )


def test_a_drain_without_claim_until_is_not_bound_by_any_claim(rig: Rig) -> None:
    """Started by hand (or by a plan from before drains carried claims): no claim, however late."""
    rig.clock.advance(86_400)
    for request in (
        {},
        {"plan_id": CLAIM["plan_id"]},
        {"planned_at": CLAIM["planned_at"], "claim_minutes": 20},
    ):
        out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **request})
        assert out["drain"]["node"] == NODE


@pytest.mark.parametrize(
    ("field", "value"),
    [("claim_until", "soon"), ("claim_until", "2026-11-02"), ("claim_until", 17),
     ("claim_until", "2026-11-02T10:01:00"),  # no zone: which time?
     ("planned_at", "nine forty"), ("planned_at", "2026-11-02T09:41:00"),
     ("claim_minutes", "twenty"), ("claim_minutes", True), ("claim_minutes", -1)],
)  # fmt: skip
def test_a_malformed_claim_is_refused_naming_the_field(rig: Rig, field: str, value: Any) -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **CLAIM, field: value})
    assert caught.value.field == field, caught.value
    assert str(caught.value).startswith(f"{field}: ")
    assert rig.writes() == []


# --- consolidation: a plan's drain of a node that runs work -----------------------------------------

PLAN = "20261102T100000Z-abc"


def evictions(rig: Rig, name: str) -> list[Any]:
    return [r for r in rig.api.requests if r.method == "POST" and r.path.endswith(f"/pods/{name}/eviction")]


def consolidation(*pods: str, **more: Any) -> dict[str, Any]:
    return {"plan_id": PLAN, "consolidation": True, "pods": [f"team-a/{p}" for p in pods], **more}


def test_a_consolidation_evicts_the_pods_it_planned_to_move_under_their_budget(rig: Rig) -> None:
    rig.api.add(objects.daemonset_pod("aws-node-x", NODE))
    rig.pod("web-0")
    rig.pod("web-1")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))

    drain = rig.cordoned(**consolidation("web-0", "web-1"), poll_seconds=1, deadline_seconds=60)
    assert drain.consolidation and drain.pods == ("team-a/web-0", "team-a/web-1")

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"] and first["blocked"] == ["team-a/web-1"]
    rig.pod("web-2", node=SPARE)  # the replacement runs elsewhere: the budget allows the next
    rig.clock.advance(1)
    last = rig.drainer.evict(drain, first)
    assert last["evicted"] == ["team-a/web-0", "team-a/web-1"]
    rig.clock.advance(1)
    assert rig.drainer.evict(drain, last)["done"] is True
    assert rig.drainer.record({"drain": drain.model_dump()}, "drained")["consolidation"] is True


def test_a_consolidation_is_cancelled_before_touching_anything_when_other_work_arrived(rig: Rig) -> None:
    rig.pod("web-0")
    rig.pod("late-job", app="late")
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **consolidation("web-0")})
    assert re.search(r"did not plan to move .*team-a/late-job", cancelled(out)["note"])
    assert rig.writes() == []


def test_a_drain_by_hand_that_names_its_pods_says_a_pod_came_after_it_was_asked_for_not_after_a_plan(
    rig: Rig,
) -> None:
    """A drain by hand with ``consolidation: true`` (README: it evicts the pods it names and no others)
    that found another pod on its node abandoned itself saying the pod "came after the plan", and kept
    it as "arrived after the plan": there is no plan, the person who asked looks for one."""
    rig.pod("web-0")
    drain = rig.cordoned(consolidation=True, pods=["team-a/web-0"], poll_seconds=5, deadline_seconds=300)
    assert drain.plan_id is None
    first = rig.drainer.evict(drain)
    rig.pod("late-0", app="late")

    second = rig.drainer.evict(drain, first)

    assert "plan" not in second["abandon"], second["abandon"]
    assert "came after the drain was asked for" in second["abandon"]
    assert "drain is abandoned" in second["abandon"]
    assert left_over(second)["team-a/late-0"] == UNNAMED


def test_a_consolidation_is_cancelled_when_a_pod_it_moves_became_protected(rig: Rig) -> None:
    rig.pod("web-0", annotations={"karpenter.sh/do-not-disrupt": "true"})
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **consolidation("web-0")})
    assert "may no longer be evicted" in cancelled(out)["note"]
    assert rig.writes() == []


@pytest.mark.parametrize(
    "annotations",
    [{"karpenter.sh/do-not-disrupt": "true"}, {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
     {"openai/do-not-drain": "true"}],
    ids=["do-not-disrupt", "not-safe-to-evict", "do-not-drain"],
)  # fmt: skip
@pytest.mark.parametrize("make_room", [False, True], ids=["consolidation", "make-room"])
def test_a_plans_drain_one_of_whose_pods_became_protected_after_its_cordon_evicts_nothing_more(
    rig: Rig, annotations: dict[str, str], make_room: bool
) -> None:
    """The validation cancels a plan's drain one of whose named pods may no longer be evicted
    (test_a_consolidation_is_cancelled_when_a_pod_it_moves_became_protected), but a pod protected after
    the cordon was only kept: the round evicted the plan's other pods (moved for a node, or a room, the
    drain could no longer free) and held the node cordoned to its deadline, where it failed as a
    timeout (the drain-timeout alarm for an operator's annotation). The round abandons instead, as for
    work that came after the plan: nothing evicted, the node given back, the pods running."""
    rig.pod("web-0")
    rig.pod("web-1")
    extra = {"uncordon": True, "terminate": False} if make_room else {}
    drain = rig.cordoned(**consolidation("web-0", "web-1"), **extra, poll_seconds=5, deadline_seconds=300)
    pod = rig.api.get("Pod", "web-1", "team-a")
    assert pod is not None
    pod["metadata"].setdefault("annotations", {}).update(annotations)
    rig.api.update("Pod", pod)
    rig.api.clear_requests()

    first = rig.drainer.evict(drain)

    assert evictions(rig, "web-0") == [], "a pod moved for a node its drain can no longer empty"
    assert "team-a/web-1 may no longer be evicted" in first["abandon"], first
    assert first["done"] is False and first["evicted_count"] == 0


def test_a_protected_pod_that_arrives_during_a_plans_drain_of_an_idle_node_abandons_it_at_once(
    rig: Rig,
) -> None:
    """Work that came after the plan abandons its drain at the next round, the node given back; a pod
    that came marked never to be disturbed was only kept, holding the node cordoned to the deadline,
    where the drain failed as a timeout."""
    drain = rig.cordoned(plan_id=PLAN, reason="idle 12 min", poll_seconds=5, deadline_seconds=300)
    rig.pod("late-0", app="late", annotations={"karpenter.sh/do-not-disrupt": "true"})

    first = rig.drainer.evict(drain)

    assert "team-a/late-0 may no longer be evicted" in first.get("abandon", ""), first
    assert first["done"] is False and first["evicted_count"] == 0


def test_a_bare_pod_that_arrives_during_a_plans_drain_of_an_idle_node_abandons_it_at_once(rig: Rig) -> None:
    """The README: a pod that came after the plan and that the drain may not evict (``no-controller``, as
    a marked one) abandons the drain at its next round; it was kept, the node held cordoned to the
    deadline, where the drain failed as a timeout."""
    drain = rig.cordoned(plan_id=PLAN, reason="idle 12 min", poll_seconds=5, deadline_seconds=300)
    rig.pod("late-0", app="late", bare=True)

    first = rig.drainer.evict(drain)

    assert "team-a/late-0 may no longer be evicted" in first.get("abandon", ""), first
    assert "no controller" in first["abandon"] and first["evicted_count"] == 0


def test_a_pod_that_arrives_during_a_consolidation_abandons_it_at_once_and_gets_the_node_back(
    rig: Rig,
) -> None:
    """Work the plan never judged came to the node after the cordon (bound by name: ``spec.nodeName``
    skips kube-scheduler's filters). The drain kept it running but held the node cordoned to its
    deadline, its free room lost to pending pods meanwhile, and then failed as a timeout (the
    drain-timeout alarm for a benign race). The next round abandons the drain: nothing more evicted, the
    state machine gives the node back (GiveBack: the compensation's uncordon) and records it cancelled,
    a success, with what it had evicted and an Event on the Node."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(**consolidation("web-0", "web-1"), poll_seconds=5, deadline_seconds=300)
    first = rig.drainer.evict(drain)
    assert sorted(first["evicted"]) == ["team-a/web-0", "team-a/web-1"] and "abandon" not in first
    rig.pod("late-0", app="late")  # came after the plan, through the cordon

    second = rig.drainer.evict(drain, first)

    assert second["done"] is False and "late-0" in second["abandon"], second
    assert "consolidation is abandoned" in second["abandon"]
    assert left_over(second)["team-a/late-0"] == ARRIVED
    assert second["evicted_count"] == 2 and second["rounds"] == first["rounds"]
    assert [r for r in rig.api.requests if r.method == "POST" and "late-0" in r.path] == []  # not evicted
    given_back = rig.drainer.uncordon(drain)  # GiveBack
    assert given_back["uncordoned"] is True and not rig.node()["spec"].get("unschedulable")
    out = rig.drainer.record({"drain": drain.model_dump(), "round": second, "compensation": given_back},
                             "cancelled")  # fmt: skip
    assert out["outcome"] == "cancelled" and out["evicted_count"] == 2, out
    assert "late-0" in out["note"] and "error" not in out, out
    assert rig.outcomes == [("cancelled", NODE)]
    [event] = [e for e in rig.api.list("Event") if e["reason"] == "SpillwayDrainCancelled"]
    assert event["type"] == "Normal" and "after evicting 2 pod(s)" in event["message"]
    assert rig.api.get("Pod", "late-0", "team-a") is not None


def test_an_abandoned_round_gives_the_node_back_and_ends_cancelled_in_the_state_machine() -> None:
    """IsEmpty sends a round with ``abandon`` to GiveBack (the compensation's uncordon) and on to a
    record step that ends the execution, a success: no Fail state, so no failures alarm for work that
    came to the node. A GiveBack that fails for good leaves the node cordoned: that fails the drain
    (DrainCancelled), as a failed compensation does."""
    states = _asl("drain_node.asl.json")["States"]
    first = states["IsEmpty"]["Choices"][0]
    assert (first["Variable"], first.get("IsPresent"), first["Next"]) == ("$.round.abandon", True, "GiveBack")
    give = states["GiveBack"]
    assert give["Parameters"] == {"action": "uncordon", "drain.$": "$.drain"}
    assert give["ResultPath"] == "$.compensation" and give["Next"] == "RecordAbandoned"
    assert [(c["ResultPath"], c["Next"]) for c in give["Catch"]] == [
        ("$.compensation_error", "GiveBackFailed")
    ]
    # a node that could not be given back stays cordoned: the drain fails, as a failed compensation does
    failed = states["GiveBackFailed"]
    assert failed["Parameters"]["Error"] == "DrainCancelled" and failed["ResultPath"] == "$.error"
    assert failed["Next"] == "RecordFailure" and states["RecordFailure"]["Next"] == "Fail"
    record = states["RecordAbandoned"]
    assert record["Parameters"] == {"action": "record", "outcome": "cancelled", "state.$": "$", **EXECUTION}
    assert record.get("End") is True


def test_a_make_room_is_not_abandoned_for_a_pod_it_does_not_move(rig: Rig) -> None:
    """A make-room keeps its node and the pods it does not move: one that came since stays, and the
    drain goes on (only a drain that takes its node away is abandoned for new work)."""
    rig.pod("web-0")
    drain = rig.cordoned(**consolidation("web-0"), uncordon=True, terminate=False, poll_seconds=5)
    rig.pod("late-0", app="late")
    first = rig.drainer.evict(drain)
    assert "abandon" not in first and first["evicted"] == ["team-a/web-0"], first


@pytest.mark.parametrize(
    "annotations",
    [{"karpenter.sh/do-not-disrupt": "true"}, {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}],
    ids=["do-not-disrupt", "not-safe-to-evict"],
)
def test_a_make_room_is_not_cancelled_for_a_protected_pod_it_leaves_running(
    rig: Rig, annotations: dict[str, str]
) -> None:
    """The README (*Make room*): pods that may not move stay, and the make-room drain evicts the pods it
    names only, leaving every other pod running; the planner makes room on such a node. The validation
    cancelled it all the same for a protected pod it does not move (read as one the plan moves that had
    become protected), so each plan's make room there was cancelled and its pending pods kept waiting."""
    rig.pod("web-0")
    rig.pod("keep-0", app="keep", annotations=annotations)
    rig.api.clear_requests()

    out = rig.drainer.validate(
        {"cluster": CLUSTER, "node": NODE, **consolidation("web-0"), "uncordon": True, "terminate": False}
    )

    assert "cancelled" not in out, out
    drain = Drain.model_validate(out["drain"])
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)
    assert "abandon" not in first and first["evicted"] == ["team-a/web-0"], first
    assert evictions(rig, "keep-0") == []


def test_a_make_room_one_of_whose_pods_became_protected_is_cancelled_as_a_make_room(rig: Rig) -> None:
    """A make room whose named pod was annotated do-not-disrupt since the plan is cancelled at its
    validation, and its note names it a make room (it keeps its node), not a consolidation."""
    rig.pod("web-0", annotations={"karpenter.sh/do-not-disrupt": "true"})
    rig.api.clear_requests()

    out = rig.drainer.validate(
        {"cluster": CLUSTER, "node": NODE, **consolidation("web-0"), "uncordon": True, "terminate": False}
    )

    note = cancelled(out)["note"]
    assert "team-a/web-0 may no longer be evicted" in note and "the make room leaves the node alone" in note
    assert rig.writes() == []


def test_a_consolidation_is_never_forced() -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        parse_request({"cluster": CLUSTER, "node": NODE, **consolidation("web-0", force=True)})
    assert caught.value.field == "force"


def test_a_consolidation_of_a_node_annotated_do_not_disrupt_since_the_plan_is_cancelled(rig: Rig) -> None:
    """The planner moves no pod off a node annotated karpenter.sh/do-not-disrupt=true (assess_move); one
    annotated after the plan must not have its pods evicted by the plan's drain."""
    rig.pod("web-0")
    _node_do_not_disrupt(rig)
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **consolidation("web-0")})

    assert "karpenter.sh/do-not-disrupt=true" in cancelled(out)["note"]
    assert rig.writes() == []


@pytest.mark.parametrize(
    ("setup", "words"),
    [(_scale_down_disabled, "cluster-autoscaler.kubernetes.io/scale-down-disabled=true"),
     (_node_do_not_disrupt, "karpenter.sh/do-not-disrupt=true")],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)  # fmt: skip
@pytest.mark.parametrize("make_room", [False, True], ids=["consolidation", "make-room"])
def test_a_plans_drain_of_a_node_protected_after_its_cordon_evicts_nothing_more_and_gives_it_back(
    rig: Rig, setup: Any, words: str, make_room: bool
) -> None:
    """The validation cancels a plan's drain of a node annotated karpenter.sh/do-not-disrupt=true or
    scale-down-disabled=true since the plan, but a drain lasts rounds (a budget lets one pod go at a
    time): an operator who annotates the node while it drains, to stop it, had the next round evict the
    pod the budget held all the same. The round abandons instead (nothing more evicted, the node given
    back: GiveBack), as for work that came after the plan."""
    rig.pod("web-0")
    rig.pod("web-1")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))
    extra = {"uncordon": True, "terminate": False} if make_room else {}
    drain = rig.cordoned(**consolidation("web-0", "web-1"), **extra, poll_seconds=1, deadline_seconds=60)
    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"] and first["blocked"] == ["team-a/web-1"]
    rig.pod("web-2", node=SPARE)  # the replacement runs elsewhere: the budget would allow the next
    setup(rig)
    rig.api.clear_requests()
    rig.clock.advance(1)

    second = rig.drainer.evict(drain, first)

    assert rig.writes() == [], "the held pod was evicted off a node its operator protected since"
    assert words in second["abandon"] and second["done"] is False, second
    assert second["evicted"] == ["team-a/web-0"] and rig.writes() == []
    given_back = rig.drainer.uncordon(drain)
    assert given_back["uncordoned"] is True and not rig.node()["spec"].get("unschedulable")
    recorded = rig.drainer.record({"drain": drain.model_dump(), "round": second, "compensation": given_back},
                                  "cancelled")  # fmt: skip
    assert recorded["outcome"] == "cancelled" and words in recorded["note"]


def test_the_check_before_terminating_sends_a_drain_whose_node_was_protected_since_back_to_its_round(
    rig: Rig,
) -> None:
    """The last round found the node empty; annotated do-not-disrupt before the check, it was terminated."""
    drain = rig.cordoned(plan_id=PLAN, reason="idle 12 min", poll_seconds=1, deadline_seconds=60)
    assert rig.drainer.evict(drain)["done"] is True
    _node_do_not_disrupt(rig)

    checked = rig.drainer.check(drain)

    assert checked["ready"] is False and "karpenter.sh/do-not-disrupt" in checked["note"], checked
    assert "karpenter.sh/do-not-disrupt" in rig.drainer.evict(drain)["abandon"]


def test_a_forced_drain_goes_on_when_its_node_is_annotated_do_not_disrupt_after_its_cordon(rig: Rig) -> None:
    """A forced drain (a Spot warning's, an operator's with force) takes a protected node anyway: an
    annotation that arrives while it drains changes nothing."""
    rig.pod("web-0")
    drain = rig.cordoned(force=True, poll_seconds=1, deadline_seconds=60)
    _node_do_not_disrupt(rig)
    first = rig.drainer.evict(drain)
    assert "abandon" not in first and first["evicted"] == ["team-a/web-0"], first


def test_force_drains_a_node_annotated_do_not_disrupt(rig: Rig) -> None:
    _node_do_not_disrupt(rig)
    assert rig.validated(force=True).force is True


# --- review of branch `detached` ----------------------------------------------------------------------


def _never_in_a_group(rig: Rig) -> None:
    """A Node whose instance no Auto Scaling group ever held (a Karpenter node, a standalone instance):
    EC2 runs it, no group lists it, no group's activity history ever detached it."""
    raw = rig.cloud.groups[("us-east-1", "general")]
    raw["Instances"] = [i for i in raw["Instances"] if i["InstanceId"] != INSTANCE]
    raw["DesiredCapacity"] -= 1
    rig.cloud.ec2[INSTANCE] = {"region": "us-east-1", "state": "running",
                               "tags": {"karpenter.sh/nodepool": "default"}}  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [{"notice": "interruption", "force": True},  # no group named: a request written by hand
     {"notice": "interruption", "force": True, "group": "general"},  # names a managed group it never was in
     {"notice": "interruption", "force": True, "group": "no-such-group"},  # names no group at all
     {"notice": "rebalance", "force": True}],  # a forced rebalance: the interrupt function never writes one
    ids=["no-group", "managed-group-never-held-it", "unknown-group", "forced-rebalance"],
)  # fmt: skip
def test_review_a_notice_request_cannot_drain_a_node_no_group_of_the_cluster_ever_held(
    rig: Rig, extra: dict[str, Any]
) -> None:
    """Before the branch any drain of an EC2 node in no Auto Scaling group was refused ("Spillway drains
    only nodes of the groups it manages"). Now a DrainNode request that carries notice/force/leaving
    (anyone with states:StartExecution can write one) cordons and force-evicts a Karpenter node."""
    rig.pod("web-0")
    _never_in_a_group(rig)
    rig.api.clear_requests()
    request = {"cluster": CLUSTER, "node": NODE, "instance_id": INSTANCE, "leaving": True,
               "reason": "by hand", **extra}  # fmt: skip
    try:
        out = rig.drainer.validate(request)
    except InvalidDrainRequest:
        out = {"refused": True}
    assert "drain" not in out, out.get("preview")
    assert rig.writes() == []


REBOOT = ("scheduled change arn:aws:health:us-east-1::event/EC2/AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED/"
          "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED_1a2b3c")  # fmt: skip


def test_review_a_scheduled_reboot_within_a_day_does_not_empty_and_cordon_a_detached_instance_for_good(
    rig: Rig,
) -> None:
    """The interrupt function forces every EC2 scheduledChange within a day (reboots and stops too, not
    only retirements). In a group the drain terminates the instance and the group replaces it; out of
    every group nothing is terminated, so after a reboot (or a stop, then a start by whoever detached
    it) the instance runs on, its Node emptied and held by Spillway's cordon ("EC2 takes it back") until
    orphaned_drain_minutes (27 h) passes. EC2 does not take back an instance for a reboot."""
    rig.pod("web-0")
    _detached(rig)
    rig.api.clear_requests()
    out = rig.drainer.validate(_notice_drain("scheduled", group="general", force=True, reason=REBOOT))
    if "drain" in out:  # what the branch does: drain, keep the cordon, terminate nothing
        drain = Drain.model_validate(out["drain"])
        rig.drainer.cordon(drain)
        rig.drainer.evict(drain)
        rig.api.delete("Pod", "web-0", "team-a")
        done = rig.drainer.record({"drain": drain.model_dump(), "round": rig.drainer.evict(drain)}, "drained")
        assert rig.node()["spec"]["unschedulable"] is False, done["note"]  # fails: cordoned for good
    else:
        assert rig.writes() == []


def test_review_a_spot_warnings_drain_of_an_instance_moved_to_another_of_the_clusters_groups_evicts(
    rig: Rig,
) -> None:
    """Same premise as the branch (EC2 takes a Spot instance whatever group it is in), other case: the
    instance was detached from `general` and attached to `batch`, also tagged for the cluster, since the
    snapshot. The forced drain is cancelled "has nothing to drain", its pods die with the instance."""
    rig.pod("web-0")
    _detached(rig)
    rig.cloud.add_group("batch", [INSTANCE], desired=1)
    out = rig.drainer.validate(_notice_drain("interruption", group="general"))
    assert "drain" in out, out["cancelled"]["note"]


def _moved_to(rig: Rig, group: str, **kw: Any) -> None:
    """The instance was detached from ``general`` and attached to ``group`` since the snapshot."""
    _detached(rig)
    rig.cloud.add_group(group, [INSTANCE, "i-0b1b2c3d4e5f60720"], **kw)


def test_a_spot_warnings_drain_of_an_instance_moved_to_another_managed_group_drains_it_there(
    rig: Rig,
) -> None:
    """EC2 takes a Spot instance whatever group it is in: one moved to another of the cluster's groups
    since the snapshot is drained as a member of that group, every check of it run against that group,
    and terminated through it."""
    rig.pod("web-0")
    _moved_to(rig, "batch")
    drain = rig.validated(**_notice_drain("interruption", group="general"))
    assert (drain.group, drain.terminate, drain.force) == ("batch", True, True)
    preview = rig.drainer.validate(_notice_drain("interruption", group="general", dry_run=True))["preview"]
    assert preview["would_terminate"]["group"] == "batch" and "outside_group" not in preview


def test_a_spot_warnings_drain_of_an_instance_moved_into_a_group_with_capacity_rebalancing_terminates_nothing(
    rig: Rig,
) -> None:
    """The interrupt function judged the group it left (no Capacity Rebalancing: terminate); the group it
    is in now replaces it itself, so terminating it with the decrement would leave that group one
    instance over, to scale in one of its own choosing."""
    _moved_to(rig, "batch")
    rig.cloud.groups[("us-east-1", "batch")]["CapacityRebalance"] = True
    drain = rig.validated(**_notice_drain("interruption", group="general"))
    assert (drain.group, drain.terminate) == ("batch", False)


@pytest.mark.parametrize(
    ("request_", "group_kw"),
    [(_notice_drain("interruption", group="general"), {"cluster": "staging"}),  # out of the cluster's groups
     (_notice_drain("rebalance", group="general"), {}),  # advice, without force
     (_notice_drain("scheduled", group="general"), {})],  # a scheduled change more than a day out
    ids=["unmanaged-group", "rebalance", "scheduled"],
)  # fmt: skip
def test_a_notices_drain_of_an_instance_moved_to_another_group_is_otherwise_cancelled(
    rig: Rig, request_: dict[str, Any], group_kw: dict[str, Any]
) -> None:
    _moved_to(rig, "batch", **group_kw)
    rig.api.clear_requests()
    note = cancelled(rig.drainer.validate(request_))["note"]
    assert "is in Auto Scaling group 'batch', not 'general' as requested" in note, note
    assert rig.writes() == []


def _activity(
    now: datetime, n: int, seconds_ago: int, description: str, status: str = "Successful"
) -> dict[str, Any]:
    start = now - timedelta(seconds=seconds_ago)
    return {"ActivityId": f"a-{n}", "AutoScalingGroupName": "general", "Description": description,
            "Cause": f"At {start:%Y-%m-%dT%H:%M:%SZ} a user request update of AutoScalingGroup constraints",
            "StartTime": start, "EndTime": start + timedelta(seconds=2), "StatusCode": status, "Progress": 100}  # fmt: skip


def _real_detach_read(rig: Rig, pages: list[list[dict[str, Any]]]) -> Any:
    """The drain reads the detach through the production adapter, its DescribeScalingActivities answered
    page by page (``NextToken`` between them) by botocore's Stubber."""
    import boto3
    from botocore.stub import Stubber

    from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings

    adapter = AwsAdapter(AwsClients(("us-east-1",), boto3.Session(), AwsSettings(max_attempts=1)), CLUSTER)
    stub = Stubber(adapter._clients.autoscaling("us-east-1"))
    for n, page in enumerate(pages):
        more = {"NextToken": f"t{n + 1}"} if n + 1 < len(pages) else {}
        expected = {"AutoScalingGroupName": "general", "MaxRecords": 100} | (
            {"NextToken": f"t{n}"} if n else {}
        )
        stub.add_response("describe_scaling_activities", {"Activities": page, **more}, expected)
    stub.activate()
    rig.cloud.detach_recorded = adapter.detach_recorded  # type: ignore[method-assign]
    return stub


def test_a_spot_warnings_drain_finds_the_detach_behind_a_wave_of_newer_activities(
    rig: Rig, moto_aws: None
) -> None:
    """Spot reclaims a pool in a wave: a tool that detaches each warned instance without decrement leaves,
    per instance, a detach and the launch of its replacement. The planner's activity read keeps the 20
    newest ended ones; behind 120 newer ones, over two pages, the drain still finds this instance's
    detach (it was cancelled "no recent scaling activity detached it", the pods dying undrained)."""
    rig.pod("web-0")
    _detached(rig, recorded=False)
    now = rig.clock()
    newer = [_activity(now, n, 1 + n // 10, f"Launching a new EC2 instance: i-0{n:016x}") for n in range(120)]
    stub = _real_detach_read(
        rig, [newer[:100], [*newer[100:], _activity(now, 999, 60, f"Detaching EC2 instance: {INSTANCE}")]]
    )

    out = rig.drainer.validate(_notice_drain("interruption", group="general"))

    assert "drain" in out, out.get("cancelled", {}).get("note")
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("seconds_ago", "status"), [(31 * 60, "Successful"), (60, "Failed"), (60, "Cancelled")],
    ids=["older-than-the-lookback", "failed", "cancelled"],
)  # fmt: skip
def test_a_detach_too_old_or_undone_is_no_evidence(
    rig: Rig, moto_aws: None, seconds_ago: int, status: str
) -> None:
    rig.pod("web-0")
    _detached(rig, recorded=False)
    now = rig.clock()
    _real_detach_read(rig, [[_activity(now, 1, seconds_ago, f"Detaching EC2 instance: {INSTANCE}", status),
                             _activity(now, 2, 40 * 60, "Launching a new EC2 instance: i-0aa")]])  # fmt: skip

    out = rig.drainer.validate(_notice_drain("interruption", group="general"))

    assert set(out) == {"cancelled"}, out
    assert "no recent scaling activity of 'general' detached it" in out["cancelled"]["note"]
    assert rig.writes() == []


# --- review of the terminate step's "left its group alive" (7b0c1a7) ---------------------------------


def test_a_spot_warnings_drain_whose_group_detached_its_instance_mid_drain_does_not_fail(
    rig: Rig,
) -> None:
    """A Spot warning's forced drain whose instance its group detached (DetachInstances, recorded in
    the group's activities; EC2 still runs it for the two minutes) is a success at validation: drained,
    ``outside_group``, no alarm (test_a_spot_warnings_drain_of_an_instance_detached_from_its_group_...).
    The same world met one step later, at the terminate step, now fails the execution with
    DrainCancelled: a `drain-node-failures` alarm and a ``cancelled`` outcome for normal operation
    (a tool reacting to the same interruption event detaches while Spillway evicts), the evicted pods
    reported as a failed drain. The outcome must not depend on whether the detach came before the
    validation or after it: no failure, nothing terminated, the node kept cordoned."""
    rig.pod("web-0")
    drain = rig.cordoned(**_notice_drain("interruption", group="general"))
    assert drain.terminate and drain.leaving and drain.force and drain.group == "general"
    rig.drainer.evict(drain)
    _detached(rig)  # the group's activities record the detach, EC2 runs it: as at validation
    rig.cloud.calls.clear()

    outcome = _terminate_or_compensate(rig, drain)

    assert rig.cloud.called("terminate_instance") == []
    assert rig.node()["spec"]["unschedulable"] is True  # EC2 takes it: stays cordoned
    assert "error" not in outcome, outcome  # 7b0c1a7: {"error": "DrainCancelled", ...}


def test_a_scheduled_changes_forced_drain_whose_instance_left_its_group_gives_the_node_back(
    rig: Rig,
) -> None:
    """A scheduled change's drain within a day of it (forced, leaving: a reboot, a stop) meant to
    terminate the instance through its group. Detached mid-drain, the terminate step now cancels and
    terminates nothing, but the compensation keeps the cordon and the draining taint (_keep_leaving:
    "EC2 takes the instance anyway"), which is false for a reboot or a stop: the instance runs on, in no
    group, its Node emptied, cordoned and tainted with nothing left to end that (the very outcome
    validation refuses such a drain to avoid: test_a_notices_drain_but_a_spot_warnings_of_a_detached_
    instance_is_still_cancelled). The README of 7b0c1a7 says the node is given back, uncordoned, but a
    Spot warning's."""
    rig.pod("web-0")
    drain = rig.cordoned(**_notice_drain("scheduled", group="general", force=True))
    assert drain.terminate and drain.leaving and drain.force
    rig.drainer.evict(drain)
    _left_mid_drain(rig)
    rig.cloud.calls.clear()

    outcome = _terminate_or_compensate(rig, drain)

    assert outcome["error"] == "DrainCancelled" and rig.cloud.called("terminate_instance") == []
    node = rig.node()
    assert not node["spec"].get("unschedulable"), outcome["compensation"]  # 7b0c1a7: stays cordoned
    assert not [t for t in node["spec"].get("taints", []) if "drain" in t["key"]], node["spec"]


def test_a_pod_made_again_under_its_name_after_the_round_listed_it_is_not_evicted(rig: Rig) -> None:
    """A round lists the node's pods, then evicts them one by one. A pod deleted meanwhile may be made
    again under the same name at once, elsewhere: a StatefulSet's, a training operator's
    (``<job>-worker-0``). An eviction by name alone hit that new pod on another node, which the drain
    never judged. The eviction now carries the listed pod's uid as a DeleteOptions precondition, as
    Karpenter's does (kubernetes-sigs/karpenter pkg/controllers/node/termination/terminator/
    eviction.go, Evict), and the API server refuses it with 409 (pkg/registry/core/pod/storage/
    eviction.go, addConditionAndDeletePod): for the drain the listed pod is gone."""
    rig.pod("train-worker-0")
    drain = rig.cordoned()
    listed = rig.kube.pods_on_node
    made: list[str] = []

    def listed_then_made_again(node: str) -> list[Pod]:
        pods = listed(node)
        if not made:
            rig.api.delete("Pod", "train-worker-0", "team-a")
            again = objects.pod("train-worker-0", "team-a", node_name=SPARE, labels={"app": "web"})
            again["metadata"].pop("uid")
            made.append(rig.api.add(again)["metadata"]["uid"])
        return pods

    rig.kube.pods_on_node = listed_then_made_again  # type: ignore[method-assign]
    round_ = rig.drainer.evict(drain)

    again = rig.api.get("Pod", "train-worker-0", "team-a")
    assert again is not None and [again["metadata"]["uid"]] == made
    assert "deletionTimestamp" not in again["metadata"]
    assert round_["evicted"] == []


@pytest.mark.parametrize(
    ("error", "request_", "recorded"),
    [
        ("DrainTimeout", {"plan_id": PLAN}, True),
        ("KubeUnavailable", {"plan_id": PLAN}, True),
        ("DrainCancelled", {"plan_id": PLAN}, False),  # the node changed: no failure
        ("DrainTimeout", {"plan_id": PLAN, "terminate": False, "uncordon": True}, False),  # make room
        ("DrainTimeout", {}, False),  # started by hand: no plan's scale-down
    ],
)
def test_a_failed_scale_down_drain_is_recorded_for_later_plans_to_wait(
    rig: Rig, error: str, request_: dict[str, Any], recorded: bool
) -> None:
    """cluster-autoscaler's --scale-down-delay-after-failure: plans learn of a plan's scale-down drain
    that failed from the state table (a claim per drain, merged into State.scale_down at load)."""
    drain = rig.cordoned(reason="idle 12 min", **request_)
    state = {
        "drain": drain.model_dump(),
        "error": _lambda_error(error, "it failed"),
        "compensation": {"untainted": True, "uncordoned": True},
    }
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)

    rig.drainer.record(state)
    rig.drainer.record(state)  # the step run again writes it once

    failed = ledger.load(CLUSTER).state.scale_down.get("failed")
    assert (failed.since if failed else None) == (T0 if recorded else None)
    assert len([i for _, i in ledger.claimed if i.startswith("scaledown-failed#")]) == (1 if recorded else 0)
    if recorded:
        # in the drains' partition: the drain function writes nothing in the cluster's own
        key = (f"{CLUSTER}#drains", f"scaledown-failed#{drain.name}")
        assert ledger.expiries[key] == T0 + timedelta(days=1)


PLANNED = {"plan_id": PLAN, "planned_at": "2026-11-02T09:59:00Z"}  # the plan's claim, a minute before T0


@pytest.mark.parametrize(
    ("error", "request_", "ended"),
    [
        ("DrainTimeout", PLANNED, True),  # failed at its deadline: the node given back
        ("KubeUnavailable", PLANNED, True),
        ("DrainCancelled", PLANNED, True),  # cancelled: its pods run on
        ("DrainTimeout", {**PLANNED, "terminate": False, "uncordon": True}, True),  # make room
        ("DrainTimeout", {}, False),  # started by hand: no plan's claim
        ("DrainTimeout", {"plan_id": PLAN}, False),  # no planned_at (drain_claim_minutes 0): no claim
        (None, PLANNED, False),  # it went: the node is gone, no claim to free
    ],
)
def test_a_plans_drain_that_ends_keeping_its_node_tells_later_plans(
    rig: Rig, error: str | None, request_: dict[str, Any], ended: bool
) -> None:
    """A plan's drain claims its node for drain_claim_minutes, and later plans count the pods it will
    evict against their PodDisruptionBudgets meanwhile. One that ended keeping the node evicts nothing
    more: it writes when, per plan and node, which the state loads as State.ended_drains (the claim
    then spends nothing: ScaleDownStage.claim_ended). Nothing was written before, so the claim spent
    the allowance until it lapsed."""
    drain = rig.cordoned(reason="idle 12 min", **request_)
    state: dict[str, Any] = {"drain": drain.model_dump()}
    if error is not None:
        state["error"] = _lambda_error(error, "it failed")
        state["compensation"] = {"untainted": True, "uncordoned": True}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)

    rig.drainer.record(state, None if error else "terminated")
    rig.drainer.record(state, None if error else "terminated")  # the step run again writes it once

    marks = ledger.load(CLUSTER).state.ended_drains
    claimed = T0 - timedelta(minutes=1)  # the claim it ends, by its plan's time (not when it ended)
    assert ({n: m.since for n, m in marks.items()}) == ({drain.node: claimed} if ended else {})
    items = [(c, i) for c, i in ledger.claimed if i.startswith("drain-ended#")]
    assert items == ([(f"{CLUSTER}#drains", f"drain-ended#{PLAN}#{drain.node}")] if ended else [])


def test_a_plans_make_room_drain_released_tells_later_plans_its_claim_ended(rig: Rig) -> None:
    """A make-room drain that succeeded (released: its moved pods evicted, the node uncordoned and kept)
    evicts nothing more, yet its claim lasts drain_claim_minutes from its plan, and the plan had
    forgotten the room once the node was uncordoned: every later plan in that time took the claim as a
    drain under way and counted all the node's pods as leaving (an elastic job's other workers there
    kept from moving by elastic-min). It writes the ended mark as a failed drain does."""
    drain = rig.cordoned(reason="make room", **PLANNED, terminate=False, uncordon=True)
    state: dict[str, Any] = {"drain": drain.model_dump(), "released": {"uncordoned": True}}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)

    out = rig.drainer.record(state, "released")

    assert out["outcome"] == "released"
    marks = ledger.load(CLUSTER).state.ended_drains
    assert {n: m.since for n, m in marks.items()} == {drain.node: T0 - timedelta(minutes=1)}


def test_a_failed_scale_down_drain_whose_record_cannot_be_written_keeps_its_outcome(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    drain = rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    ledger.fail("claim", AwsUnavailable("DynamoDB: connection reset"))

    with caplog.at_level(logging.WARNING, logger="spillway.act.drain"):
        out = rig.drainer.record(
            {"drain": drain.model_dump(), "error": _lambda_error("DrainTimeout", "late")}
        )

    assert out["outcome"] == "timeout" and rig.outcomes == [("timeout", NODE)]
    assert "not recorded for later plans" in caplog.text


def _ds_evictions(rig: Rig) -> list[str]:
    return sorted(
        w.split("/")[-2] for w in rig.writes() if w.startswith("POST") and "/namespaces/kube-system/" in w
    )


def _daemonsets(rig: Rig, **notes: str | None) -> None:
    for name, value in notes.items():
        pod = objects.daemonset_pod(name, NODE, ds=name)
        if value is not None:
            pod["metadata"].setdefault("annotations", {})[ENABLE_DS_EVICTION] = value
        rig.api.add(pod)


def _drain_to_empty(rig: Rig, drain: Drain, *, occupied: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Evict rounds until the node is empty of other pods (``occupied``: one web pod to evict first),
    then one more round, which must evict no DaemonSet pod again."""
    if occupied:
        first = rig.drainer.evict(drain)
        assert first["evicted"] == ["team-a/web-0"] and "daemonsets" not in first
        rig.api.delete("Pod", "web-0", "team-a")  # its kubelet confirms the eviction
        done = rig.drainer.evict(drain, first)
    else:
        done = rig.drainer.evict(drain)
    assert done["done"]
    rig.api.clear_requests()
    again = rig.drainer.evict(drain, done)
    assert _ds_evictions(rig) == [] and again["daemonsets"] == done["daemonsets"]
    return done, again


def test_an_occupied_nodes_drain_evicts_its_daemonset_pods_once_the_others_are_gone(rig: Rig) -> None:
    """cluster-autoscaler evicts an occupied node's DaemonSet pods before it deletes the node
    (--daemonset-eviction-for-occupied-nodes, default true), but none annotated
    cluster-autoscaler.kubernetes.io/enable-ds-eviction with a value other than "true" (its
    daemonset.PodsToEvict). Spillway's drain left every DaemonSet pod to die with its instance, so a log
    shipper lost what it had not flushed."""
    rig.pod("web-0")
    _daemonsets(rig, fluentbit=None, keeper="false", odd="yes")
    drain = rig.cordoned(reason="idle 12 min")
    rig.api.clear_requests()

    done, _ = _drain_to_empty(rig, drain, occupied=True)

    assert done["daemonsets"] == ["kube-system/fluentbit"]
    assert rig.drainer.check(drain)["ready"]  # nothing waits for them


def test_an_empty_nodes_drain_evicts_only_daemonset_pods_that_opt_in(rig: Rig) -> None:
    """--daemonset-eviction-for-empty-nodes is false by default: only a pod annotated
    enable-ds-eviction "true" is evicted from a node the drain found empty."""
    _daemonsets(rig, fluentbit=None, shipper="true")
    drain = rig.cordoned(reason="idle 12 min")
    rig.api.clear_requests()

    done = rig.drainer.evict(drain)

    assert done["done"] and done["daemonsets"] == ["kube-system/shipper"]
    assert _ds_evictions(rig) == ["shipper"]


@pytest.mark.parametrize(
    "mark",
    [{"karpenter.sh/do-not-disrupt": "true"}, {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
     {"openai/do-not-drain": "1"}],
    ids=["do-not-disrupt", "not-safe-to-evict", "do-not-drain"],
)  # fmt: skip
def test_a_drain_evicts_no_daemonset_pod_marked_never_to_be_disturbed(rig: Rig, mark: dict[str, str]) -> None:
    """The README: a DaemonSet pod annotated do-not-disrupt "is not moved either (no drain evicts it)",
    as Karpenter's drain evicts no do-not-disrupt pod, DaemonSet pods included
    (kubernetes-sigs/karpenter pkg/utils/pod/scheduling.go, IsEvictable). The DaemonSet eviction at the
    end of a drain that terminates its node evicted every DaemonSet pod, marked or not, opted in by
    enable-ds-eviction "true" or by default: the marked one was stopped through the API as if it had
    no mark. It goes with the instance instead, as the pods of a drain that evicts none do."""
    rig.pod("web-0")
    _daemonsets(rig, fluentbit=None, shipper="true")
    for name in ("fluentbit", "shipper"):
        pod = rig.api.get("Pod", name, "kube-system")
        assert pod is not None
        pod["metadata"].setdefault("annotations", {}).update(mark)
        rig.api.update("Pod", pod)
    _daemonsets(rig, agent=None)
    drain = rig.cordoned(reason="idle 12 min")
    rig.api.clear_requests()

    done, _ = _drain_to_empty(rig, drain, occupied=True)

    assert done["daemonsets"] == ["kube-system/agent"]
    for name in ("fluentbit", "shipper"):
        pod = rig.api.get("Pod", name, "kube-system")
        assert pod is not None and not pod["metadata"].get("deletionTimestamp"), name


def _pin(rig: Rig, name: str) -> None:
    pod = rig.api.get("Pod", name, "kube-system")
    assert pod is not None
    pod["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
    rig.api.update("Pod", pod)


@pytest.mark.parametrize("consolidating", [False, True], ids=["idle", "consolidation"])
def test_a_plans_drain_of_a_node_whose_daemonset_pod_is_annotated_do_not_disrupt_since_is_cancelled(
    rig: Rig, consolidating: bool
) -> None:
    """The planner keeps a node running a DaemonSet pod annotated karpenter.sh/do-not-disrupt from every
    drain that removes it (``pod-never``, as Karpenter's ValidatePodsDisruptable reads every active pod
    of a node): no drain evicts such a pod, and it dies with the node. A plan's drain of a node whose
    DaemonSet pod was annotated since the plan went on (a DaemonSet pod keeps no node busy) and
    terminated the node with the pod on it."""
    _daemonsets(rig, shipper=None)
    _pin(rig, "shipper")
    rig.pod("web-0")
    request = consolidation("web-0") if consolidating else {"plan_id": PLAN, "reason": "idle 12 min"}
    if not consolidating:
        rig.api.delete("Pod", "web-0", "team-a")
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": CLUSTER, "node": NODE, **request})

    assert "kube-system/shipper" in cancelled(out)["note"] and "do-not-disrupt" in cancelled(out)["note"]
    assert rig.writes() == []


def test_a_daemonset_pod_annotated_do_not_disrupt_during_a_plans_drain_abandons_it(rig: Rig) -> None:
    _daemonsets(rig, shipper=None)
    rig.pod("web-0")
    rig.pod("web-1")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))
    drain = rig.cordoned(**consolidation("web-0", "web-1"), poll_seconds=1, deadline_seconds=60)
    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"]
    _pin(rig, "shipper")
    rig.api.clear_requests()

    second = rig.drainer.evict(drain, first)

    assert "kube-system/shipper" in second["abandon"] and rig.writes() == [], second


def test_a_drain_by_hand_is_not_held_by_a_daemonset_pod_annotated_do_not_disrupt(rig: Rig) -> None:
    """An operator's drain names its node: the pod goes with the instance, not evicted (as before)."""
    _daemonsets(rig, shipper=None)
    _pin(rig, "shipper")
    drain = rig.cordoned(reason="by hand")
    done = rig.drainer.evict(drain)
    assert done["done"] and done["daemonsets"] == [] and rig.drainer.check(drain)["ready"]


def test_a_forced_drain_evicts_a_marked_daemonset_pod_with_the_others(rig: Rig) -> None:
    """``force`` overrides the marks, as it does for every other pod."""
    _daemonsets(rig, shipper="true")
    pod = rig.api.get("Pod", "shipper", "kube-system")
    assert pod is not None
    pod["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
    rig.api.update("Pod", pod)
    drain = rig.cordoned(reason="by hand", force=True)

    done = rig.drainer.evict(drain)

    assert done["done"] and done["daemonsets"] == ["kube-system/shipper"]


@pytest.mark.parametrize(("empty", "occupied"), [(True, False), (False, False)])
def test_the_daemonset_eviction_settings_choose_the_default_per_kind_of_node(
    rig: Rig, empty: bool, occupied: bool
) -> None:
    rig.drainer.daemonset_eviction = DaemonSetEviction(empty=empty, occupied=occupied)
    _daemonsets(rig, fluentbit=None, shipper="true")
    drain = rig.cordoned(reason="idle 12 min")

    done = rig.drainer.evict(drain)

    assert done["daemonsets"] == (
        ["kube-system/fluentbit", "kube-system/shipper"] if empty else ["kube-system/shipper"]
    )


@pytest.mark.parametrize(
    "request_",
    [
        {"reason": "make room", "plan_id": PLAN, "terminate": False, "uncordon": True},  # the node stays
        _notice_drain("interruption", group="general"),  # as aws-node-termination-handler: they go with it
        _notice_drain("scheduled", group="general", terminate=True),
    ],
    ids=["make-room", "spot-warning", "scheduled-change"],
)
def test_a_drain_cluster_autoscaler_would_not_make_evicts_no_daemonset_pod(
    rig: Rig, request_: dict[str, Any]
) -> None:
    _daemonsets(rig, shipper="true")
    drain = rig.validated(**{k: v for k, v in request_.items() if k not in ("cluster", "node")})
    rig.drainer.cordon(drain)
    rig.api.clear_requests()

    done = rig.drainer.evict(drain)

    assert done["done"] and "daemonsets" not in done and _ds_evictions(rig) == []


def test_a_daemonset_eviction_the_api_refuses_does_not_fail_the_drain(rig: Rig) -> None:
    _daemonsets(rig, shipper="true")
    drain = rig.cordoned(reason="idle 12 min")
    rig.drainer.kube = _RefusingEvictions(rig.kube)  # type: ignore[assignment]

    first = rig.drainer.evict(drain)
    # its answer lost (it may have been applied): the next round looks, and a second failure ends it
    assert first["done"] is False and [u["pod"] for u in first["unconfirmed"]] == ["kube-system/shipper"]
    rig.clock.advance(drain.poll_seconds)
    done = rig.drainer.evict(drain, first)

    assert done["done"] and done["daemonsets"] == [] and "API server down" in done["daemonsets_error"]


class _RefusingEvictions:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    def evict(self, *args: Any, **kw: Any) -> None:
        raise KubeUnavailable("API server down")


def test_the_drain_function_takes_the_daemonset_eviction_settings_from_the_configuration() -> None:
    from types import SimpleNamespace

    from spillway.clients import Clients
    from spillway.config import PlannerConfig

    planner = PlannerConfig(
        daemonset_eviction_for_empty_nodes=True, daemonset_eviction_for_occupied_nodes=False
    )
    config = SimpleNamespace(
        cluster_name=CLUSTER, regions=("us-east-1",), lifecycle_hook_names=(), planner=planner
    )
    executions = SimpleNamespace(status=lambda arn: "RUNNING")
    clients = Clients(config, None, None, None, None, None, None, None, executions, _kube=object())  # type: ignore[arg-type]

    drainer = clients.drainer(lambda *_: None)
    assert drainer.daemonset_eviction == DaemonSetEviction(empty=True, occupied=False)
    assert drainer.executions is executions.status  # a forced drain standing by reads the other's status
    assert Drainer(
        object(), object(), ledger=FakeLedger(), cluster=CLUSTER, regions=()
    ).daemonset_eviction == (  # type: ignore[arg-type]
        DaemonSetEviction(empty=False, occupied=True)
    )


# --- a drain by hand that keeps its node hands its cordon over ----------------------------------------


def test_only_a_drain_by_hand_that_keeps_its_node_hands_its_cordon_over(rig: Rig) -> None:
    """A notice's drain that keeps its node (the instance is leaving: a rebalance recommendation's) and
    a plan's keep Spillway's cordon, which later plans read as a drain's (a Capacity Rebalancing group
    replaces such an instance); a drain by hand hands it over: still cordoned, no annotation, no taint."""
    notice = rig.cordoned(force=True, leaving=True, terminate=False, notice="rebalance")
    assert rig.drainer.hand_over(notice) == {"handed_over": False}
    assert "spillway.io/cordoned" in rig.node()["metadata"]["annotations"]

    rig.drainer.uncordon(notice)
    by_hand = rig.cordoned(terminate=False)
    assert rig.drainer.hand_over(by_hand) == {"handed_over": True}
    node = rig.node()
    assert node["spec"]["unschedulable"] is True
    assert "spillway.io/cordoned" not in node["metadata"]["annotations"]
    assert "spillway.io/draining" not in [t["key"] for t in node["spec"]["taints"]]


def test_a_drain_by_hand_whose_node_somebody_uncordoned_hands_nothing_over(rig: Rig) -> None:
    """The operator uncordoned the node while the drain ran: the hand-over never cordons it again."""
    drain = rig.cordoned(terminate=False)
    node = rig.node()
    node["spec"]["unschedulable"] = False
    rig.api.update("Node", node)

    out = rig.drainer.hand_over(drain)

    assert out["handed_over"] is False and "left as it is" in out["note"]
    assert not rig.node()["spec"].get("unschedulable")


def _spot_warning_request(rig: Rig, warned: datetime) -> tuple[str, dict[str, Any]]:
    """The DrainNode execution (name, input) the interrupt function starts for EC2's Spot interruption
    warning of INSTANCE sent at ``warned``, handled at the rig's time."""
    from fakes import FakeSnapshots, FakeWorkflows

    from spillway.act.interrupt import Interrupter
    from spillway.model.cluster import ClusterSnapshot
    from spillway.model.nodegroup import NodeGroup
    from spillway.model.snapshot import Snapshot

    node = NodeInfo(name=NODE, allocatable={"cpu": 4000}, provider_id=f"aws:///us-east-1a/{INSTANCE}",
                    labels={"node.kubernetes.io/instance-type": "m5.large"})  # fmt: skip
    group = NodeGroup(name="general", region="us-east-1", min_size=0, max_size=10, desired=2,
                      instance_type="m5.large", template=None, zones=("us-east-1a",),
                      instance_ids=(INSTANCE, SPARE_INSTANCE), capacity_type="spot")  # fmt: skip
    snapshots, workflows = FakeSnapshots(), FakeWorkflows()
    snapshots.add(Snapshot.build(ClusterSnapshot(cluster=CLUSTER, taken_at=warned, nodes=(node,), pods=()),
                                 [group], warned))  # fmt: skip
    interrupter = Interrupter(snapshots=snapshots, workflows=workflows, ledger=FakeLedger(), cluster=CLUSTER,
                              regions=("us-east-1",), drain_node_arn="arn:aws:states:us-east-1:123456789012:"
                              "stateMachine:drain-node", clock=rig.clock)  # fmt: skip
    [out] = interrupter.handle(Notice("interruption", "e-1", "us-east-1", warned, (INSTANCE,)))
    assert out["outcome"] == "drain_started"
    [request] = workflows.requests
    return request.name, dict(request.input)


@pytest.mark.parametrize("late", [0, 25])
def test_a_spot_warnings_drain_that_starts_late_still_ends_its_deadline_counted_from_the_warning(
    rig: Rig, late: int
) -> None:
    """EC2 reclaims a Spot instance two minutes after its warning's ``time``, and the interrupt function
    gives the drain INTERRUPTION_DEADLINE_SECONDS (90) counted from that time: 80 s for a warning it
    reads 10 s late. But the drain counted those 80 s from its own validation, so any time between the
    two moved its end later: a StartExecution the SDK retries after throttling (up to about 15 s), the
    drain function's cold start, a validation Step Functions retries (Lambda.TooManyRequestsException,
    KubeUnavailable). 25 s late, the forced end came at 115 s; with the deadline at its allowed 115 s,
    a few seconds put it past the reclaim, and the pods a budget held died with the instance,
    unevicted. The request now carries ``deadline_by``, the warning's time plus the deadline, and the
    drain keeps to it however late it starts. (Found by adversarial testing.)"""
    warned = T0 - timedelta(seconds=10)
    name, request = _spot_warning_request(rig, warned)
    assert request["deadline_seconds"] == 80
    rig.clock.advance(late)

    drain = Drain.model_validate(
        run_action(rig.drainer, {"action": "validate", "request": request, "execution": name})["drain"]
    )

    assert drain.deadline == warned + timedelta(seconds=90)
    assert drain.deadline_seconds == 80 - late


def test_deadline_by_only_ever_brings_the_deadline_sooner(rig: Rig) -> None:
    """``deadline_by`` caps the deadline, never extends it, and one already past leaves none."""
    later = rig.validated(deadline_seconds=60, deadline_by="2026-11-02T11:00:00Z")
    past = rig.validated(deadline_seconds=60, deadline_by="2026-11-02T09:59:00Z")
    assert (later.deadline, later.deadline_seconds) == (T0 + timedelta(seconds=60), 60)
    assert (past.deadline, past.deadline_seconds) == (T0, 0)


@pytest.mark.parametrize("value", ["2026-11-02", "2026-11-02T10:01:30", "in 90 s", 1793613690])
def test_a_deadline_by_that_is_no_time_with_its_zone_is_refused_naming_it(rig: Rig, value: Any) -> None:
    with pytest.raises(InvalidDrainRequest) as err:
        rig.validated(deadline_by=value)
    assert err.value.field == "deadline_by"
    assert rig.writes() == []


@pytest.mark.parametrize(("plan_id", "ended"), [(PLAN, True), (None, False)])
def test_a_plans_drain_cancelled_at_validation_tells_later_plans_its_claim_ended(
    rig: Rig, plan_id: str | None, ended: bool
) -> None:
    """A plan's drain its validation cancelled touched nothing; the node's pods run on, so its claim
    spends no PodDisruptionBudget allowance any more (State.ended_drains, by the plan's time). A drain
    of no plan claimed nothing and writes nothing."""
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    cancelled_answer = {"node": "ip-10-0-0-9", "plan_id": plan_id, "reason": "idle", "note": "busy now",
                        "planned_at": "2026-11-02T09:59:00Z"}  # fmt: skip

    rig.drainer.record({"cancelled": cancelled_answer}, "cancelled")

    marks = ledger.load(CLUSTER).state.ended_drains
    claimed = T0 - timedelta(minutes=1)
    assert {n: m.since for n, m in marks.items()} == ({"ip-10-0-0-9": claimed} if ended else {})


@pytest.mark.parametrize("ended", ["older-plan", "this-claim"])
def test_an_older_plans_drain_cancelled_after_a_newer_claim_leaves_that_claim_spending(
    rig: Rig, ended: str
) -> None:
    """Plan 1 claimed a at 11:39 and its drain queued behind others past its claim (until 11:59); plan 2
    claimed a again at 11:59:10, its drain still to run; plan 1's drain then validated at 11:59:30 and
    was cancelled, its claim lapsed. It wrote when it ended, and the planner took any drain that ended
    at or after the node's claim as that claim's: plan 2's claim spent nothing and the plan at 12:00
    drained b under the one disruption db allows, beside plan 2's drain of a (two evictions waiting on
    one disruption). The item names the plan's time now: plan 1's frees nothing of plan 2's claim; plan
    2's own drain ending frees it."""
    from test_planner_consolidation import UNDER, _db_world, kept

    w, a, b = _db_world()
    from plan_world import NOW

    newer = NOW - timedelta(seconds=50)
    w.state["nodes"][a] = {"idle_since": NOW.isoformat(), "draining_since": newer.isoformat()}
    rig.clock.now = NOW - timedelta(seconds=30)
    if ended == "older-plan":
        older = {"plan_id": "20261102T113900Z-abc", "planned_at": "2026-11-02T11:39:00Z", "claim_minutes": 20,
                 "claim_until": "2026-11-02T11:59:00Z"}  # fmt: skip
        answer = rig.drainer.validate({"cluster": CLUSTER, "node": a, **older})
        assert "cancelled" in answer, answer
    else:
        answer = {"cancelled": {"node": a, "plan_id": "20261102T115910Z-abc", "reason": "idle",
                                "note": "busy now", "planned_at": "2026-11-02T11:59:10Z"}}  # fmt: skip
    rig.drainer.record(answer, "cancelled")
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    w.state["ended_drains"] = {
        node: {"since": mark.since.isoformat()}
        for node, mark in ledger.load(CLUSTER).state.ended_drains.items()
    }

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    if ended == "older-plan":
        assert result.drain == ()
        assert "drains under way evict 1" in kept(result)[b][1]
    else:
        assert [d.node for d in result.drain] == [b]
    assert kept(result)[a][0] == "drain-planned"


@pytest.mark.parametrize(
    ("planned_at", "ended"), [("2026-11-02T09:59:00Z", True), ("nine fifty-nine", False)]
)
def test_a_plans_drain_rejected_at_validation_names_its_claim_from_the_request(
    rig: Rig, planned_at: str, ended: bool
) -> None:
    """A plan's drain its validation rejected touched nothing: the record step has only the request
    (no validated drain), whose planned_at names the claim it ends. One it cannot read names no claim,
    and writes nothing: that claim spends until it lapses."""
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    request = {"cluster": CLUSTER, "node": NODE, "plan_id": PLAN, "planned_at": planned_at}

    rig.drainer.record({**request, "error": _lambda_error("InvalidDrainRequest", "no such node")}, "rejected")

    marks = ledger.load(CLUSTER).state.ended_drains
    assert {n: m.since for n, m in marks.items()} == ({NODE: T0 - timedelta(minutes=1)} if ended else {})


# --- DrainOutcome once per execution ------------------------------------------------------------------

EXECUTION_ARN = "arn:aws:states:us-east-1:123456789012:execution:DrainNode:plan-a-node-1"


def _record(rig: Rig, state: dict[str, Any], outcome: str, execution: str | None = EXECUTION_ARN) -> Any:
    """The record step as the state machine calls it (its Parameters: ``execution.$`` the execution's ARN)."""
    event = {"action": "record", "outcome": outcome, "state": state}
    return run_action(rig.drainer, event if execution is None else {**event, "execution": execution})


def test_a_record_step_run_again_for_its_execution_counts_the_drain_once(rig: Rig) -> None:
    """The record step's Retry takes Lambda's service errors, which a function that ran to the end may
    still answer (its answer lost): the step ran again and DrainOutcome counted the drain twice, once
    per run. Now the first run to count marks the execution, and a run after it counts nothing (its
    output is the same); another execution counts, and so does a record without an execution (a state
    machine of an older build), as before. The cancelled path counts the same way."""
    drain = rig.validated()
    state = {"drain": drain.model_dump(), "round": {"evicted": [], "evicted_count": 0, "rounds": 1}}

    first = _record(rig, state, "released")
    again = _record(rig, state, "released")

    assert first == again and first["outcome"] == "released"
    assert rig.outcomes == [("released", NODE)]
    _record(rig, state, "released", EXECUTION_ARN + "-2")
    _record(rig, state, "released", None)
    _record(rig, state, "released", None)
    assert rig.outcomes == [("released", NODE)] * 4

    cancelled = {"cancelled": {"node": NODE, "note": "its claim lapsed"}}
    for _ in range(2):
        assert _record(rig, cancelled, "cancelled", EXECUTION_ARN + "-3")["outcome"] == "cancelled"
    assert rig.outcomes[4:] == [("cancelled", NODE)]


def test_a_drain_whose_count_mark_cannot_be_written_is_counted_all_the_same(rig: Rig) -> None:
    """The mark is a write to the state table: when it fails the drain is counted anyway (a rare count
    too many beats a drain nobody counted), and the record step does not fail for it."""
    drain = rig.validated()
    state = {"drain": drain.model_dump(), "error": _lambda_error("DrainTimeout", "deadline")}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    ledger.fail("claim", AwsThrottled("Rate exceeded"))

    out = _record(rig, state, "timeout")

    assert out["outcome"] == "timeout" and rig.outcomes == [("timeout", NODE)]


def test_an_ended_mark_throttled_fails_the_record_step_so_its_retry_writes_it(rig: Rig) -> None:
    """A released make room's ended mark (``drain-ended#<plan>#<node>``) could not be written, DynamoDB
    throttling past botocore's retries: the record swallowed it, and the claim went on spending the
    budget and taking the node's workers as leaving until it lapsed. The record step now fails
    AwsThrottled (nothing counted yet), its Retry runs it again, and that run writes the mark and counts
    the drain once. Any other error stays best effort."""
    drain = rig.cordoned(reason="make room", **PLANNED, terminate=False, uncordon=True)
    state: dict[str, Any] = {"drain": drain.model_dump(), "released": {"uncordoned": True}}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    ledger.fail("claim", AwsThrottled("Rate exceeded"), times=1)

    with pytest.raises(AwsThrottled):
        _record(rig, state, "released")
    assert rig.outcomes == [] and ledger.load(CLUSTER).state.ended_drains == {}
    out = _record(rig, state, "released")

    assert out["outcome"] == "released" and rig.outcomes == [("released", NODE)]
    assert set(ledger.load(CLUSTER).state.ended_drains) == {drain.node}

    ledger.claimed.clear()
    ledger.fail("claim", AwsError("AccessDeniedException: not allowed"), times=1)
    assert _record(rig, state, "released", EXECUTION_ARN + "-2")["outcome"] == "released"
    assert ledger.load(CLUSTER).state.ended_drains == {}  # best effort, as before


def test_every_record_step_retries_a_throttled_or_unanswered_state_table() -> None:
    """The record steps raise AwsThrottled and AwsUnavailable when the ended mark is not written; each
    one's Retry names them (else the Catch would take the first as the step failing for good)."""
    states = json.loads((ROOT / "statemachines" / "drain_node.asl.json").read_text())["States"]
    records = [s for s in states.values() if (s.get("Parameters") or {}).get("action") == "record"]
    assert len(records) == 9
    for state in records:
        assert any(r["ErrorEquals"] == ["AwsThrottled", "AwsUnavailable"] for r in state["Retry"]), state


@pytest.mark.parametrize("outcome", ["released", "abandoned"])
def test_a_record_step_run_again_for_a_throttled_ended_mark_puts_one_event_on_the_node(
    rig: Rig, outcome: str
) -> None:
    """The ended mark throttled past botocore's retries fails the record step so that its Retry writes
    it; the run that failed had already put its Event on the Node (each run's Event is a new object,
    named by the time), so the retry put a second one, and up to three more while the table throttled:
    ``kubectl describe node`` listed the one drain's end as several. The record's Event is named by its
    execution now: a run again is refused 409 AlreadyExists, and the Node keeps one."""
    drain = rig.cordoned(reason="make room", **PLANNED, terminate=False, uncordon=True)
    state: dict[str, Any] = {"drain": drain.model_dump(), "released": {"uncordoned": True}}
    if outcome == "abandoned":
        state = {"drain": drain.model_dump(), "round": {"abandon": "work arrived", "evicted_count": 0}}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    ledger.fail("claim", AwsThrottled("Rate exceeded"), times=1)
    step = "released" if outcome == "released" else "cancelled"

    with pytest.raises(AwsThrottled):
        _record(rig, state, step)
    out = _record(rig, state, step)

    assert out["outcome"] == step and rig.outcomes == [(step, NODE)]
    events = [e for e in rig.api.list("Event") if e["involvedObject"]["name"] == NODE]
    assert len([e for e in events if e["reason"] != "SpillwayDraining"]) == 1, events


def test_a_drain_redriven_days_later_whose_record_runs_again_counts_it_once(rig: Rig) -> None:
    """Step Functions redrives a failed, aborted or timed-out Standard execution up to 14 days after it
    ended, under the same execution ARN, from the step that did not succeed (AWS Step Functions API
    Reference, RedriveExecution). A drain stopped while its record step ran (the function ran to the
    end and counted) and redriven days later ran the record again: its mark, kept an hour, had been
    deleted by DynamoDB's TTL by then, and the one drain was counted twice. The mark now outlasts the
    redrive window."""
    drain = rig.validated()
    state = {"drain": drain.model_dump(), "round": {"evicted": [], "evicted_count": 0, "rounds": 1}}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)

    _record(rig, state, "released")
    rig.clock.advance(timedelta(days=14).total_seconds())  # the last day a redrive may come
    for key, expires in list(ledger.expiries.items()):  # DynamoDB's TTL deletes what expired by then
        if expires <= rig.clock.now:
            ledger.claimed.pop(key, None)
    again = _record(rig, state, "released")

    assert again["outcome"] == "released" and rig.outcomes == [("released", NODE)]


@pytest.mark.parametrize("mark", ["written", "throttled for good"])
def test_a_record_step_run_again_for_its_execution_leaves_one_event_on_the_node(rig: Rig, mark: str) -> None:
    """A record step runs again for its execution when Lambda answered a service error after the
    function ran (written: every run succeeds), or while its ended mark is throttled (throttled for
    good: every run fails, and the state machine's Catch ends the drain released and counts it). Each
    run put its own Event, so the first case left two on the Node; and a mark written before the
    Event would leave none in the second, though the drain ended. One Event either way."""
    drain = rig.cordoned(reason="make room", **PLANNED, terminate=False, uncordon=True)
    state: dict[str, Any] = {"drain": drain.model_dump(), "released": {"uncordoned": True}}
    ledger = rig.drainer.ledger
    assert isinstance(ledger, FakeLedger)
    if mark == "written":
        for _ in range(2):
            assert _record(rig, state, "released")["outcome"] == "released"
    else:
        ledger.fail("claim", AwsThrottled("Rate exceeded"), times=4)
        for _ in range(4):  # the first run and the Retry's three
            with pytest.raises(AwsThrottled):
                _record(rig, state, "released")

    events = [e for e in rig.api.list("Event") if e["involvedObject"]["name"] == NODE]
    assert [e["reason"] for e in events if e["reason"] != "SpillwayDraining"] == ["SpillwayReleased"]
    assert rig.outcomes == ([("released", NODE)] if mark == "written" else [])


def test_a_validation_answer_carries_when_a_mark_of_the_execution_may_expire(rig: Rig) -> None:
    """DrainNode's own count (a record step failed for good) first writes the mark the drain function
    writes, with Step Functions' DynamoDB PutItem; JSONPath has no clock as a number, so those marks had
    no ``expires_at`` and DynamoDB's TTL never deleted them. The validation (the drain function, on its
    clock) answers the epoch seconds the mark may expire at: past the longest the execution runs on
    from there (MAX_EXECUTION_SECONDS), then DRAIN_COUNTED_KEPT, as the function's own mark is kept."""
    expected = str(int((T0 + timedelta(seconds=MAX_EXECUTION_SECONDS) + DRAIN_COUNTED_KEPT).timestamp()))
    request = {"cluster": CLUSTER, "node": NODE}

    answer = run_action(rig.drainer, {"action": "validate", "request": request, "execution": "by-hand-1"})
    ahead = {**SCHEDULED, "not_before": "2026-11-04T10:00:00Z"}
    waiting = run_action(rig.drainer, {"action": "validate", "request": ahead, "execution": "by-hand-2"})

    assert "drain" in answer and answer[COUNTED_EXPIRES_AT] == expected  # a string: DynamoDB's N
    assert "waiting" in waiting and waiting[COUNTED_EXPIRES_AT] == expected


def test_with_terminate_suspended_a_drain_of_a_pending_instance_still_terminates(rig: Rig) -> None:
    """The suspension "applies only to instances that are currently in the InService state. It does not
    prevent the termination of instances in other states, such as Pending" (EC2 Auto Scaling User Guide,
    "Considerations for suspending processes"): a Node whose instance still waits in Pending:Wait (a
    launch lifecycle hook) is drained and terminated, as a give-back and an unregistered instance's
    removal terminate one (act.instances.terminate_held: one rule)."""
    _terminate_suspended(rig)
    rig.cloud.groups[("us-east-1", "general")]["Instances"][0]["LifecycleState"] = "Pending:Wait"

    assert rig.validated(force=True).terminate is True
