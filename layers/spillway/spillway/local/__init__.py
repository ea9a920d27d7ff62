"""The embedded stack of ``spillway demo`` and of the integration tests: nothing here runs in Lambda.

* :mod:`spillway.local.kubeapi` — a local Kubernetes API server (``KubeApiServer``) that the official
  ``kubernetes`` client talks to unchanged: nodes, pods, PDB-aware evictions, events, paging, faults.

Import submodules directly; this package imports nothing so that each part stays optional.
"""
