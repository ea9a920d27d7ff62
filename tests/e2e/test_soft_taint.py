"""The scale-down candidate taint end to end: the real plan function, on snapshots the real observe code
takes, marks an idle node in the API server (PreferNoSchedule, one merge patch) and lifts the mark once
a pod runs there; the busy node is never marked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Cloud, running

from spillway.local import objects as o

CANDIDATE = {"key": "spillway.io/scale-down-candidate", "effect": "PreferNoSchedule"}


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    with running(SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES="0") as rig:  # the rig's nodes are new
        yield rig


def taints(cloud: Cloud, node: str) -> list[dict[str, Any]]:
    obj = cloud.kube.get("Node", node)
    assert obj is not None
    return list(obj["spec"].get("taints") or [])


def plan_once(cloud: Cloud) -> dict[str, Any]:
    [outcome] = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"]
    return dict(outcome)


def test_an_idle_node_is_marked_and_the_mark_is_lifted_once_a_pod_runs_there(cloud: Cloud) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    idle, busy = sorted(cloud.wait_nodes(2))
    cloud.kube.add(o.pod("web-0", "team-a", cpu="500m", memory="512Mi", node_name=busy,
                         owner=("ReplicaSet", "web-5d9c")))  # fmt: skip
    cloud.kube.clear_requests()

    first = plan_once(cloud)

    assert first["soft_taints"] == {"written": 1, "failed": 0, "errors": []}, first
    assert taints(cloud, idle) == [CANDIDATE] and taints(cloud, busy) == []
    patches = [r for r in cloud.kube.requests if r.method == "PATCH" and r.path.startswith("/api/v1/nodes/")]
    assert [r.path for r in patches] == [f"/api/v1/nodes/{idle}"]
    assert {r.content_type for r in patches} == {"application/merge-patch+json"}

    # kube-scheduler put a pod there anyway (nothing else fitted): the next plan lifts the mark
    cloud.kube.add(o.pod("job-0", "team-a", cpu="500m", memory="512Mi", node_name=idle, owner=("Job", "job")))
    second = plan_once(cloud)

    assert second["soft_taints"] == {"written": 1, "failed": 0, "errors": []}, second
    assert taints(cloud, idle) == [] and taints(cloud, busy) == []
    records = [
        json.loads(p["plan"]["S"]) for p in sorted(cloud.plans(), key=lambda p: p["snapshot_key"]["S"])
    ]
    marks = [m for r in records for m in r.get("soft_taint", [])]
    assert [(m["node"], m["add"]) for m in marks] == [(idle, True), (idle, False)]
    assert marks[0]["reason"].startswith("idle-below-threshold")
    assert "no longer a scale-down candidate: workload" in marks[1]["reason"]
