"""Adapters between Spillway and the outside world; each turns its SDK's errors into ``spillway.errors``.

Import the module you need (``spillway.adapters.kube``, ``spillway.adapters.eks_auth``, ...): this package
imports none of them, so a function that needs only DynamoDB does not pay for the Kubernetes client.

The only place Spillway calls an SDK. Adapters implement :mod:`spillway.ports`; they never import the act
layer or the planner.
"""
