"""The rig's own waits, which every end-to-end test builds on: each must return on the condition it
names, however the rig's threads are scheduled on a loaded machine."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import Cloud


def test_wait_nodes_returns_only_once_the_registrar_names_the_instance_of_each_node(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registrar (the rig's kubelets) adds a Node to the API, then records which instance it is
    (``registrar.registered``). wait_nodes returned once the API listed enough Nodes, so a test that read
    ``registrar.registered`` right after it could miss an instance whose record had not been written yet
    (test_drain_faults' nodes_of found one node of two so, under load). Here the registrar's thread is held
    for a second between a Node and its record, as a loaded machine may hold it."""
    add = cloud.kube.add

    def slow_add(obj: dict[str, Any]) -> Any:
        out = add(obj)
        if obj.get("kind") == "Node":
            time.sleep(1.0)  # the registrar's thread, preempted before it records the Node's instance
        return out

    monkeypatch.setattr(cloud.kube, "add", slow_add)
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)

    names = cloud.wait_nodes(2)

    instances = {i["InstanceId"] for i in cloud.asg("g")["Instances"]}
    registered = dict(cloud.registrar.registered)
    assert set(registered) == instances, registered
    assert sorted(registered.values()) == sorted(names)
