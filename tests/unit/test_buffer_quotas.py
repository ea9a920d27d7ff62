"""CapacityBuffers cut to what their namespace's ResourceQuotas leave, and the LimitedByQuotas condition,
as cluster-autoscaler's buffer controller allocates quotas (capacitybuffer/controller/resourcequotas.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spillway.model.buffer import BufferInfo, buffer_infos, limit_by_quotas, status_update
from spillway.model.k8s import CapacityBuffer, PodTemplate, ResourceQuota

NOW = datetime(2026, 3, 24, 9, 0, tzinfo=UTC)


def template(name: str = "web", requests: dict[str, str] | None = None, **spec: Any) -> PodTemplate:
    resources = {"requests": requests if requests is not None else {"cpu": "2", "memory": "4Gi"}}
    return PodTemplate.model_validate({
        "metadata": {"name": name, "namespace": "shop"},
        "template": {"spec": {"containers": [{"name": "c", "resources": resources}], **spec}},
    })  # fmt: skip


def buffer(
    name: str = "headroom", replicas: int = 5, created: int = 0, ref: str = "web", **spec: Any
) -> CapacityBuffer:
    return CapacityBuffer.model_validate({
        "metadata": {"name": name, "namespace": "shop", "generation": 2,
                     "creationTimestamp": (NOW + timedelta(minutes=created)).isoformat()},
        "spec": {"podTemplateRef": {"name": ref}, "replicas": replicas, **spec},
    })  # fmt: skip


def quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, namespace: str = "shop",
          **spec: Any) -> ResourceQuota:  # fmt: skip
    """As the API serves it: status.hard and status.used written by the quota controller."""
    return ResourceQuota.model_validate({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": hard, **spec},
        "status": {"hard": hard, "used": used or {}},
    })  # fmt: skip


def allocate(
    buffers: list[CapacityBuffer], templates: list[PodTemplate], quotas: list[ResourceQuota]
) -> dict[str, BufferInfo]:
    infos = limit_by_quotas(buffers, buffer_infos(buffers, templates), quotas)
    return {i.name: i for i in infos}


def conditions(status: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    assert status is not None
    return {c["type"]: c for c in status["conditions"]}


def test_a_buffer_the_quota_cannot_hold_is_cut_and_says_so_in_its_status() -> None:
    obj = buffer(replicas=5)
    [info] = allocate(
        [obj], [template()], [quota("compute", {"requests.cpu": "10"}, {"requests.cpu": "4"})]
    ).values()

    assert info.replicas == 3  # (10 - 4) // 2
    status = status_update(obj, info, NOW)
    assert status is not None and status["replicas"] == 3  # status.replicas shows the cut
    limited = conditions(status)["LimitedByQuotas"]
    assert (limited["status"], limited["reason"], limited["message"], limited["observedGeneration"]) == (
        "True",
        "ResourceQuotasAllocated",
        "Buffer replicas limited from 5 to 3 due to quotas: compute",
        2,
    )
    assert conditions(status)["Provisioning"]["message"].startswith("3 virtual pod(s)")


def test_a_buffer_the_quotas_hold_says_limited_false_with_no_message() -> None:
    obj = buffer(replicas=2)
    [info] = allocate(
        [obj], [template()], [quota("compute", {"requests.cpu": "10"}, {"requests.cpu": "4"})]
    ).values()

    assert info.replicas == 2
    limited = conditions(status_update(obj, info, NOW))["LimitedByQuotas"]
    assert (limited["status"], limited["reason"], limited["message"]) == (
        "False",
        "ResourceQuotasAllocated",
        "",
    )


def test_earlier_buffers_take_first_by_creation_time_then_name() -> None:
    # "a-late" sorts first by name but was created last: the others take before it
    buffers = [
        buffer("a-late", 4, created=10),
        buffer("z-early", 2, created=0),
        buffer("m-same", 2, created=0),
    ]
    infos = allocate(buffers, [template()], [quota("compute", {"cpu": "12"})])

    assert {n: i.replicas for n, i in infos.items()} == {"z-early": 2, "m-same": 2, "a-late": 2}
    assert infos["a-late"].quota == ("True", "Buffer replicas limited from 4 to 2 due to quotas: compute")
    assert infos["z-early"].quota == infos["m-same"].quota == ("False", "")


def test_every_quota_that_cannot_hold_all_chunks_is_named_and_the_least_room_wins() -> None:
    quotas = [
        quota("mem", {"requests.memory": "20Gi"}),  # 5 chunks of 4Gi
        quota("cpu", {"cpu": "8"}),  # 4 chunks
        quota("roomy", {"requests.cpu": "100"}),
    ]
    [info] = allocate([buffer(replicas=6)], [template()], quotas).values()

    assert info.replicas == 4
    assert info.quota == ("True", "Buffer replicas limited from 6 to 4 due to quotas: cpu, mem")


@pytest.mark.parametrize(
    ("hard", "chunks"),
    [
        ({"requests.nvidia.com/gpu": "3"}, 3),  # an extended resource's quota, one GPU a chunk
        ({"requests.ephemeral-storage": "10Gi"}, 5),  # 2Gi a chunk
        ({"pods": "1"}, 9),  # not counted: the controller leaves pods out
        ({"count/pods": "1"}, 9),
        ({"limits.cpu": "1"}, 9),  # buffers are held by their requests only
        ({"requests.memory": "0"}, 0),
    ],
)
def test_which_resources_of_a_quota_are_compared(hard: dict[str, str], chunks: int) -> None:
    gpu = template(requests={"cpu": "1", "nvidia.com/gpu": "1", "ephemeral-storage": "2Gi", "memory": "1Gi"})
    [info] = allocate([buffer(replicas=9)], [gpu], [quota("q", hard)]).values()
    assert info.replicas == chunks


def test_an_overdrawn_quota_leaves_no_chunk_and_the_buffer_is_empty() -> None:
    obj = buffer(replicas=3)
    [info] = allocate([obj], [template()], [quota("compute", {"cpu": "4"}, {"cpu": "5"})]).values()

    assert info.replicas == 0 and not info.active_at(NOW)
    found = conditions(status_update(obj, info, NOW))
    assert found["LimitedByQuotas"]["message"] == "Buffer replicas limited from 3 to 0 due to quotas: compute"
    assert (found["Provisioning"]["status"], found["Provisioning"]["reason"]) == ("False", "BufferIsEmpty")


def test_the_quota_controllers_status_hard_is_what_counts_not_the_spec() -> None:
    raw = quota("compute", {"cpu": "100"}).model_dump(by_alias=True)
    raw["status"] = {
        "hard": {"cpu": "4"},
        "used": {},
    }  # the spec was raised, the controller has not caught up
    [info] = allocate([buffer(replicas=5)], [template()], [ResourceQuota.model_validate(raw)]).values()
    assert info.replicas == 2


def test_only_quotas_of_the_buffers_namespace_count() -> None:
    [info] = allocate(
        [buffer(replicas=5)], [template()], [quota("other", {"cpu": "2"}, namespace="web")]
    ).values()
    assert (info.replicas, info.quota) == (5, ("False", ""))


@pytest.mark.parametrize(
    ("spec", "pod_spec", "applies"),
    [
        ({"scopes": ["NotTerminating"]}, {}, True),  # buffer pods never terminate
        ({"scopes": ["Terminating"]}, {}, False),
        ({"scopes": ["BestEffort"]}, {}, False),  # the chunk requests CPU and memory
        ({"scopes": ["NotBestEffort"]}, {}, True),
        ({"scopes": ["PriorityClass"]}, {}, False),  # Exists: the chunk names no class
        ({"scopes": ["PriorityClass"]}, {"priorityClassName": "low"}, True),
        ({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
         {"priorityClassName": "high"}, True),
        ({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
         {"priorityClassName": "low"}, False),
        ({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}}, {}, True),
        ({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}}, {}, True),
        ({"scopes": ["NotTerminating"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}, {}, False),  # all must select
        ({"scopes": ["CrossNamespacePodAffinity"]}, {}, False),
        ({"scopes": ["CrossNamespacePodAffinity"]},
         {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
             {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "namespaces": ["other"]}}]}}}, True),
        ({"scopes": ["CrossNamespacePodAffinity"]},
         {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
             {"topologyKey": "zone", "namespaceSelector": {}}]}}}, True),
        ({"scopes": ["VolumeAttributesClass"]}, {}, False),  # a scope the controller does not know
    ],
)  # fmt: skip
def test_a_quota_counts_only_when_its_scopes_select_the_chunk(
    spec: dict[str, Any], pod_spec: dict[str, Any], applies: bool
) -> None:
    [info] = allocate(
        [buffer(replicas=5)], [template(**pod_spec)], [quota("scoped", {"cpu": "4"}, **spec)]
    ).values()
    assert info.replicas == (2 if applies else 5)


def test_a_chunk_without_cpu_or_memory_is_best_effort() -> None:
    quotas = [quota("be", {"requests.nvidia.com/gpu": "1"}, scopes=["BestEffort"])]
    [info] = allocate([buffer(replicas=5)], [template(requests={"nvidia.com/gpu": "1"})], quotas).values()
    assert info.replicas == 1


def test_buffers_not_ready_or_requesting_nothing_are_passed_by_and_their_condition_left() -> None:
    earlier = {"type": "LimitedByQuotas", "status": "True", "reason": "ResourceQuotasAllocated",
               "message": "old", "lastTransitionTime": "2026-03-01T00:00:00Z"}  # fmt: skip
    missing = buffer("missing", ref="nope")
    empty = buffer("empty", ref="nothing")
    infos = allocate([missing, empty], [template("nothing", requests={})], [quota("compute", {"cpu": "1"})])

    assert infos["missing"].quota is None and infos["empty"].quota is None
    assert infos["empty"].replicas == 5
    obj = CapacityBuffer.model_validate({**missing.model_dump(by_alias=True, mode="json"),
                                         "status": {"conditions": [earlier]}})  # fmt: skip
    status = status_update(obj, infos["missing"], NOW)
    assert conditions(status)["LimitedByQuotas"]["message"] == "old"


def test_limited_by_quotas_keeps_its_transition_time_while_its_status_holds() -> None:
    obj = buffer(replicas=5)
    quotas = [quota("compute", {"cpu": "6"})]
    [info] = allocate([obj], [template()], quotas).values()
    first = status_update(obj, info, NOW)
    written = CapacityBuffer.model_validate({**obj.model_dump(by_alias=True, mode="json"), "status": first})

    assert status_update(written, info, NOW + timedelta(minutes=1)) is None  # unchanged: nothing written
    [more] = allocate([written], [template()], [quota("compute", {"cpu": "8"})]).values()
    second = conditions(status_update(written, more, NOW + timedelta(minutes=2)))["LimitedByQuotas"]
    assert second["message"] == "Buffer replicas limited from 5 to 4 due to quotas: compute"
    assert second["lastTransitionTime"] == "2026-03-24T09:00:00Z"  # still True: the time it became so
    [room] = allocate([written], [template()], [quota("compute", {"cpu": "20"})]).values()
    cleared = conditions(status_update(written, room, NOW + timedelta(minutes=3)))["LimitedByQuotas"]
    assert (cleared["status"], cleared["lastTransitionTime"]) == ("False", "2026-03-24T09:03:00Z")


def test_the_cut_and_the_condition_survive_the_stored_snapshot() -> None:
    [info] = allocate([buffer(replicas=5)], [template()], [quota("compute", {"cpu": "6"})]).values()
    assert BufferInfo.from_dict(info.to_dict()) == info
