"""A buffer keeps its room through a scale-down: observe reads a CapacityBuffer and its PodTemplate from the
cluster (and writes the buffer's status), the plan keeps the idle node whose free room holds the buffer
(code ``buffer``) and drains the idle node without it, through the real drain-node state machine."""

from __future__ import annotations

import json
import os

from conftest import Cloud


def fast_scale_down() -> None:
    """Nodes go as soon as they are idle, all of them in one plan if they may: only the buffer keeps one
    (the plan Lambda reads these at its next invocation; the rig puts the environment back on exit)."""
    os.environ.update({"SCALE_DOWN_IDLE_MINUTES": "0", "SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES": "0",
                       "MAX_SCALE_IN_FRACTION": "1", "DRAIN_DEADLINE_SECONDS": "20",
                       "DRAIN_POLL_SECONDS": "1"})  # fmt: skip


def plan_record(cloud: Cloud, key: str) -> dict[str, object]:
    [item] = [i for i in cloud.plans() if i.get("snapshot_key", {}).get("S") == key]
    found: dict[str, object] = json.loads(item["plan"]["S"]) if "plan" in item else {}
    return found


def test_an_idle_node_holding_buffer_room_is_kept_and_the_other_drained(cloud: Cloud) -> None:
    fast_scale_down()
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    nodes = sorted(cloud.wait_nodes(2))
    # one chunk of 2 CPUs: an m5.xlarge (3.9 CPUs allocatable) holds one, so one node holds the buffer
    spec = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]}
    cloud.kube.add({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": "web"},
                    "template": {"spec": spec}})  # fmt: skip
    cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                    "metadata": {"name": "headroom", "namespace": "web"},
                    "spec": {"podTemplateRef": {"name": "web"}, "replicas": 1}})  # fmt: skip

    key = cloud.snapshot()
    [outcome] = cloud.plan(cloud.stream_event(key))["results"]
    assert outcome["status"] == "acted", outcome

    record = plan_record(cloud, key)
    kept = {k["node"]: k["code"] for k in record["kept"]}  # type: ignore[attr-defined]
    drained = [d["node"] for d in record["drain"]]  # type: ignore[attr-defined]
    [holding] = [n for n, code in kept.items() if code == "buffer"]
    assert drained == [n for n in nodes if n != holding]
    assert record["scale_up"] == [] and record["pending"] == []  # the buffer needs no new node

    cloud.wait_all(timeout=60)
    finished = cloud.wait_all(timeout=60)  # the scale-down and the drain it started (listed once started)
    assert sorted(e["name"].split("-", 1)[0] for e in finished) == ["down", "drain"], finished
    assert {e["status"] for e in finished} == {"SUCCEEDED"}, finished
    assert sorted(n["metadata"]["name"] for n in cloud.kube.list("Node")) == [holding]
    assert cloud.desired("general") == 1

    # observe wrote the buffer's status as its controller does
    buffer = cloud.kube.get("CapacityBuffer", "headroom", "web")
    assert buffer is not None
    status = buffer["status"]
    assert status["replicas"] == 1 and status["podTemplateRef"] == {"name": "web"}
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    # no ResourceQuota in the namespace: allocated and not limited (the controller writes False)
    assert ready == {"ReadyForProvisioning": "True", "Provisioning": "True", "LimitedByQuotas": "False"}

    # the next plan keeps the last node for the buffer (nothing drains it)
    again = cloud.snapshot()
    cloud.plan(cloud.stream_event(again))
    assert {k["node"]: k["code"] for k in plan_record(cloud, again)["kept"]} == {holding: "buffer"}  # type: ignore[attr-defined]


def test_a_buffer_no_group_can_hold_is_reported_short_by_the_plan_and_its_status_says_no_more(
    cloud: Cloud,
) -> None:
    """A CapacityBuffer whose template selects a label no group has (a typo): the plan record's
    ``buffers`` entry says every chunk is short (no-group-fits) and the plan counts them; the buffer's
    status stays what cluster-autoscaler's would be (Provisioning True, FakePodsInjected: it writes no
    shortfall into the status), its message pointing at the plan's ``buffers`` entry."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.wait_nodes(1)
    spec = {"nodeSelector": {"pool": "servng"},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]}  # fmt: skip
    cloud.kube.add({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": "web"},
                    "template": {"spec": spec}})  # fmt: skip
    cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                    "metadata": {"name": "headroom", "namespace": "web"},
                    "spec": {"podTemplateRef": {"name": "web"}, "replicas": 3}})  # fmt: skip

    key = cloud.snapshot()
    [outcome] = cloud.plan(cloud.stream_event(key))["results"]

    assert outcome["summary"]["buffer_chunks_short"] == 3, outcome
    [entry] = plan_record(cloud, key)["buffers"]  # type: ignore[misc]
    assert {k: entry[k] for k in ("buffer", "replicas", "held", "launching", "short", "code")} == {
        "buffer": "web/headroom", "replicas": 3, "held": 0, "launching": 0, "short": 3, "code": "no-group-fits",
    }  # fmt: skip
    assert "pool=servng" in entry["reason"]
    buffer = cloud.kube.get("CapacityBuffer", "headroom", "web")
    assert buffer is not None
    [provisioning] = [c for c in buffer["status"]["conditions"] if c["type"] == "Provisioning"]
    assert (provisioning["status"], provisioning["reason"]) == ("True", "FakePodsInjected")
    assert "its buffers entry: held, launching, short and why" in provisioning["message"]
