"""Volcano's "normal" pods: a pod for Volcano's scheduler that names no PodGroup gets one from Volcano's
podgroup controller, which creates the group first and annotates the pod afterwards. A snapshot taken
between the two sees both, and must count the pod once.

The PodGroups here are built as that controller builds them (volcano-sh/volcano
pkg/controllers/podgroup/pg_controller_handler.go, ``buildPodGroupFromPod`` and
``newPGOwnerReferences``; the name from ``helpers.GeneratePodgroupName``)."""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import World, pending_codes, scale_up

from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import Pod
from spillway.model.shared import volcano_normal_group

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge
VOLCANO = "scheduling.volcano.sh/v1beta1"
GROUP_NAME = "scheduling.k8s.io/group-name"


def cpu_world() -> World:
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    return w


def volcano_pods(w: World, prefix: str, count: int, **kwargs: Any) -> list[str]:
    """Pods for Volcano's scheduler (``schedulerName: volcano``), no group-name annotation yet."""
    keys = w.pods(prefix, count, **kwargs)
    for key in keys:
        w.pod_item(key)["spec"]["schedulerName"] = "volcano"
    return keys


def controller_podgroup(w: World, pod_key: str, *, min_member: int = 1, phase: str | None = "Pending") -> str:
    """The PodGroup Volcano's podgroup controller creates for the unannotated pod ``pod_key``: named
    ``podgroup-<uid>`` after the pod's controller owner, else the pod itself; owned as the pod is (its
    own ownerReferences), else by the pod; ``minMember`` 1 unless its owner's
    ``scheduling.volcano.sh/group-min-member`` says more; ``minResources`` the pod's requests that many
    times. Its key."""
    pod = w.pod_item(pod_key)
    meta = pod["metadata"]
    controller = next((r for r in meta.get("ownerReferences", ()) if r.get("controller")), None)
    if controller is not None:
        name, owners = f"podgroup-{controller['uid']}", list(meta["ownerReferences"])
    else:
        name = f"podgroup-{meta['uid']}"
        owners = [
            {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], "controller": True,
             "blockOwnerDeletion": True}
        ]  # fmt: skip
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    min_resources = {r: _times(v, min_member) for r, v in requests.items()}
    spec = {"minMember": min_member, "minResources": min_resources}
    w.pod_group(VOLCANO, name, meta["namespace"], spec=spec, phase=phase)
    w.items[-1]["metadata"]["ownerReferences"] = owners
    return f"{meta['namespace']}/{name}"


def _times(quantity: str, n: int) -> str:
    digits = quantity.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return f"{int(digits) * n}{quantity[len(digits) :]}"


def test_a_plain_pod_and_the_podgroup_made_for_it_before_its_annotation_launch_one_node() -> None:
    w = cpu_world()
    [pod] = volcano_pods(w, "solo", 1, owner=None, **BIG)
    controller_podgroup(w, pod)

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 1, [pod])


def test_a_replicasets_pods_and_their_shared_podgroup_are_one_gang_counted_once() -> None:
    """All the pods of one controller share its group (podgroup-<controller uid>); with minMember 2
    (the owner's group-min-member) they are a gang of 2, not 2 pods plus 2 pod-less ones."""
    w = cpu_world()
    pods = volcano_pods(w, "web", 2, owner=("ReplicaSet", "web-5d4f"), **BIG)
    gang = controller_podgroup(w, pods[0], min_member=2)

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 2, pods)
    assert [g.gang for g in result.scale_up[0].gangs] == [gang]


def test_the_podgroup_just_created_without_a_phase_is_the_pods_too() -> None:
    w = cpu_world()
    [pod] = volcano_pods(w, "batch", 1, owner=("Job", "nightly"), **BIG)
    controller_podgroup(w, pod, phase=None)

    assert scale_up(w.plan())["cpu-east"] == (0, 1, [pod])


def test_a_podgroup_named_for_another_pods_uid_stays_pod_less_demand() -> None:
    """Volcano finds a normal pod's group by name alone; a group named for some other object is not
    this pod's, even in its namespace."""
    w = cpu_world()
    [pod] = volcano_pods(w, "solo", 1, owner=None, **BIG)
    w.pod_group(VOLCANO, "podgroup-0b7c1d2e-0000-4000-8000-000000000001", spec={"minMember": 1,
                "minResources": {"cpu": "5"}}, phase="Pending")  # fmt: skip

    up = scale_up(w.plan())["cpu-east"]

    assert up[:2] == (0, 2) and pod in up[2]


def test_a_podgroup_in_another_namespace_is_not_the_pods() -> None:
    """The group elsewhere, made for pods their controller makes, is no demand without them
    (test_planner_gangs.py, made for another controller's pods); its minMember of 2 tells whether the
    pod was taken into it: a member, the pod would wait for a second one (gang-incomplete)."""
    w = cpu_world()
    [pod] = volcano_pods(w, "web", 1, owner=("ReplicaSet", "web-5d4f"), **BIG)
    key = controller_podgroup(w, pod, min_member=2)
    w.items[-1]["metadata"]["namespace"] = "elsewhere"

    up = scale_up(w.plan())["cpu-east"]

    assert up == (0, 1, [pod]) and key.startswith("default/")


def test_a_volcano_job_podgroup_still_pending_without_pods_keeps_its_virtual_pods() -> None:
    """A batch.volcano.sh Job's group (``<job>-<job uid>``, owned by the Job: volcano-sh/volcano
    pkg/controllers/job) has no pods until Inqueue; a normal pod beside it does not take its place."""
    w = cpu_world()
    [pod] = volcano_pods(w, "solo", 1, owner=None, **BIG)
    controller_podgroup(w, pod)
    uid = "5e0b2f9a-7c1d-4e8f-9a0b-1c2d3e4f5a6b"
    w.pod_group(
        VOLCANO, f"train-{uid}", spec={"minMember": 2, "minResources": {"cpu": "10"}}, phase="Pending"
    )
    w.items[-1]["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": uid,
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip

    result = w.plan()

    start, to, pods = scale_up(result)["cpu-east"]
    virtual = [f"default/train-{uid}[0]", f"default/train-{uid}[1]"]
    assert (start, to, sorted(pods)) == (0, 3, [pod, *virtual])


def test_an_annotated_pod_is_its_named_groups_member_not_the_one_named_for_it() -> None:
    """Once annotated, the annotation decides (Volcano's controller leaves such a pod alone)."""
    w = cpu_world()
    [pod] = volcano_pods(w, "solo", 1, owner=None, annotations={GROUP_NAME: "chosen"}, **BIG)
    w.pod_group(VOLCANO, "chosen", spec={"minMember": 2}, phase="Inqueue")

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)[pod] == "gang-incomplete"


def test_the_link_is_in_the_snapshot_and_survives_its_round_trip() -> None:
    w = cpu_world()
    [pod] = volcano_pods(w, "solo", 1, owner=None, **BIG)
    key = controller_podgroup(w, pod)
    snapshot = w.parsed()[0]

    wire = snapshot.to_dict()
    restored = ClusterSnapshot.from_dict(wire)

    assert [(p.key, p.gang) for p in snapshot.pods] == [(pod, key)]
    assert [(p.key, p.gang) for p in restored.pods] == [(pod, key)] and restored.to_dict() == wire


def test_a_finished_pod_is_never_taken_into_the_group() -> None:
    w = cpu_world()
    [pod] = volcano_pods(w, "solo", 1, owner=None, phase="Succeeded", **BIG)
    key = controller_podgroup(w, pod)

    snapshot = w.parsed()[0]

    assert [p.gang for p in snapshot.pods] == [None] and snapshot.gang_succeeded == {}
    assert [g.key for g in snapshot.gangs] == [key]


def _meta(**fields: Any) -> Pod:
    return Pod.model_validate(
        {"metadata": {"name": "p", "namespace": "ns", **fields}, "spec": {"containers": []}}
    )


OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"uid": "pod-uid"}, "ns/podgroup-pod-uid"),
        ({"uid": "pod-uid", "ownerReferences": [{**OWNER, "controller": True}]}, "ns/podgroup-rs-uid"),
        # an owner that is no controller names nothing: the pod's own uid does
        ({"uid": "pod-uid", "ownerReferences": [OWNER]}, "ns/podgroup-pod-uid"),
        ({"uid": "pod-uid", "ownerReferences": [OWNER, {**OWNER, "uid": "c", "controller": True}]},
         "ns/podgroup-c"),
        ({"uid": "pod-uid", "annotations": {GROUP_NAME: "chosen"}}, None),
        # an empty annotation names nothing, to Volcano as here
        ({"uid": "pod-uid", "annotations": {GROUP_NAME: ""}}, "ns/podgroup-pod-uid"),
        ({"uid": "pod-uid", "labels": {"scheduling.x-k8s.io/pod-group": "g"}}, None),
        ({}, None),  # no uid known: no name to match
    ],
    ids=["own-uid", "controller-uid", "owner-not-controller", "first-controller", "annotated",
         "empty-annotation", "other-gang", "no-uid"],
)  # fmt: skip
def test_the_group_volcano_names_for_a_pod(fields: dict[str, Any], expected: str | None) -> None:
    assert volcano_normal_group(_meta(**fields)) == expected
