"""Trace replay in simulated time through the same planner: ``spillway simulate``.

``trace`` reads Philly's job digest and a generic CSV; ``world`` models the cluster (Auto Scaling
groups, nodes that boot, a kube-scheduler-like scheduler, gangs, capacity outages); ``policies`` holds
Spillway's planner and three reference policies; ``engine`` is the event loop; ``bounds`` the lower
bounds; ``report`` the figures; ``run.simulate`` puts them together.
"""
