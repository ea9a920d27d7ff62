"""The demo's scheduler pass reports a bind to a node that registered after the tick's watch with the
node's region, and announces the node first (a kubelet registers on its own thread, between the watch
and the scheduler)."""

from __future__ import annotations

import io
from datetime import datetime

from spillway.local import objects
from spillway.local.demo import NAMESPACE, Demo, DemoOptions, Job, TraceJob, schedule
from spillway.local.kubeapi import KubeApiServer
from spillway.local.kubeapi.resources import resolve_kind


def test_a_bind_to_a_node_registered_after_the_watch_names_its_region_after_announcing_it() -> None:
    demo = Demo(DemoOptions(teams=False, night=False), io.StringIO())
    job = Job(TraceJob("job-07", datetime(2017, 10, 4), 0.0, 400.0, 8), wave=2, arrive_at=0.0, run_for=10.0)
    demo.jobs.append(job)
    with KubeApiServer() as api:
        api.add(objects.pod(job.pod, NAMESPACE, cpu="100m", memory="1Gi", gpus=8))
        demo._watch_nodes(api)  # the tick's watch: no node yet
        name = objects.node_name_for("i-0aaa1111bbbb2222c", "us-west-2")
        api.add(objects.node(name, instance="i-0aaa1111bbbb2222c", zone="us-west-2a",
                             instance_type="p3.16xlarge", gpus=8,
                             labels={"topology.kubernetes.io/region": "us-west-2"}))  # fmt: skip
        demo._scheduler(api)
    assert (job.node, job.region) == (name, "us-west-2")
    kinds = [e.kind for e in demo.result.events]
    assert kinds == ["node", "bind"], demo.result.events


def test_a_terminating_pods_room_is_not_given_to_a_pending_pod_until_it_is_gone() -> None:
    """kube-scheduler keeps a pod being deleted in its cache, its requests on its node, until the pod is
    deleted (pkg/scheduler/eventhandlers.go: updatePodInCache keeps it, only deletePodFromCache removes
    it), so the replacement of a pod still terminating waits for its room. The demo's scheduler left
    every pod being deleted out, bound ones too, and bound the pending pod onto a node whose CPU the
    terminating pod still held."""
    name = objects.node_name_for("i-0aaa1111bbbb2222c", "us-east-1")
    with KubeApiServer() as api:
        api.add(objects.node(name, instance="i-0aaa1111bbbb2222c"))  # 7910m CPU
        api.add(objects.pod("old", NAMESPACE, cpu="6", memory="1Gi", node_name=name, phase="Running"))
        api.kubelet_exit_delay = 3600  # its containers take their time to stop
        api.store.delete(resolve_kind("Pod"), NAMESPACE, "old", {"gracePeriodSeconds": 30})
        assert (api.get("Pod", "old", NAMESPACE) or {})["metadata"].get("deletionTimestamp")
        api.add(objects.pod("new", NAMESPACE, cpu="6", memory="1Gi"))

        while_terminating = schedule(api, "2026-12-05T00:00:00Z")
        api.delete("Pod", "old", NAMESPACE)  # its kubelet confirms the deletion
        once_gone = schedule(api, "2026-12-05T00:00:40Z")

    assert (while_terminating, once_gone) == ([], [(f"{NAMESPACE}/new", name)])
