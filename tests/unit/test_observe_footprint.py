"""What the observe function holds in memory: the modules it loads and what an observation keeps.

The observe Lambda's footprint target is 256 MB at 5,000 nodes and 50,000 pods (README, "Observing:
measured"; ``bench/observe.py`` measures it). These tests hold the reductions that keep it there.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
