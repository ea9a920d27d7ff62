"""The demo's scheduler pass reports a bind to a node that registered after the tick's watch with the
node's region, and announces the node first (a kubelet registers on its own thread, between the watch
and the scheduler)."""

from __future__ import annotations

import io
from datetime import datetime

from spillway.local import objects
from spillway.local.demo import NAMESPACE, Demo, DemoOptions, Job, TraceJob
from spillway.local.kubeapi import KubeApiServer


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
