"""What the observe function holds in memory: the modules it loads and what an observation keeps.

The observe Lambda's footprint target is 256 MB at 5,000 nodes and 50,000 pods (README, "Observing:
measured"; ``bench/observe.py`` measures it). These tests hold the reductions that keep it there.
"""

from __future__ import annotations

import json
import subprocess
import sys

from spillway.local import objects as o
from spillway.model.cluster import PdbMatcher, PodInfo, SucceededMembers, TopologyMatcher, VolcanoNormalPods
from spillway.model.k8s import Pod, PodDisruptionBudget

# Generated API modules of the kubernetes client the adapter has no use for: each is megabytes of
# methods, and imports the models its methods name (AppsV1Api 4 MB, StorageV1Api 3 MB with the core
# API loaded). The adapter lists their resources through CustomObjectsApi, as raw JSON, like every
# other list it reads.
UNUSED_API_MODULES = (
    "kubernetes.client.api.apps_v1_api",
    "kubernetes.client.api.storage_v1_api",
)


def test_observe_does_not_load_the_apps_and_storage_api_modules() -> None:
    code = (
        "import json, sys\n"
        "import spillway.adapters.kube, spillway.observe\n"
        f"print(json.dumps([m for m in {UNUSED_API_MODULES!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []


def test_the_matchers_let_go_of_the_pods_labels_once_applied() -> None:
    """Observe keeps each bound pod's labels (PdbMatcher, TopologyMatcher) and each pod's would-be
    Volcano group until every pod and budget is read; at 50,000 pods that is about 33 MB, which was
    still held while the snapshot was built and compressed. Once applied, nothing of a pod is kept."""
    pods = [
        Pod.model_validate(o.pod(f"p{i}", "team-a", node_name="n1", labels={"app": "train", "i": str(i)}))
        for i in range(3)
    ]
    budgets, topology, normal = PdbMatcher(), TopologyMatcher(), VolcanoNormalPods()
    budgets.add(
        PodDisruptionBudget.model_validate(o.pdb("train", "team-a", {"app": "train"}, min_available=1))
    )
    held = [sys.getrefcount(p.metadata.labels) for p in pods]
    for index, pod in enumerate(pods):
        for matcher in (budgets, topology, normal):
            matcher.remember(index, pod)
    assert [sys.getrefcount(p.metadata.labels) for p in pods] > held  # kept while reading
    infos = normal.apply([PodInfo.from_pod(p) for p in pods], (), SucceededMembers())
    infos = list(topology.apply(list(budgets.apply(infos))))
    assert [i.pdbs for i in infos] == [("train",)] * 3
    assert [sys.getrefcount(p.metadata.labels) for p in pods] == held
    assert normal.apply(infos, (), SucceededMembers()) == infos  # nothing left to apply
