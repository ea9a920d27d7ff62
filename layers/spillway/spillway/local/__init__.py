"""The embedded stack of ``spillway demo``, the e2e tests and the benchmarks: nothing here runs in Lambda.

* :class:`spillway.local.Rig` (:mod:`spillway.local.rig`) — the one rig: template.yaml on moto, CloudSim,
  the Kubernetes API emulator and kubelets, the cluster's groups, the stream into the plan function;
* :mod:`spillway.local.objects` — the one builder of Kubernetes and AWS CLI objects, and of generated
  clusters;
* :mod:`spillway.local.kubeapi` — a local Kubernetes API server (``KubeApiServer``) that the official
  ``kubernetes`` client talks to unchanged: nodes, pods, PDB-aware evictions, events, paging, faults.

Importing this package imports nothing else (``Rig`` is loaded on first use), so each part stays optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spillway.local.rig import Rig, create_group

__all__ = ["Rig", "create_group"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from spillway.local import rig

        return getattr(rig, name)
    raise AttributeError(f"module 'spillway.local' has no attribute {name!r}")
