"""The pure planner: every scaling decision, as data with reasons.

Imports only :mod:`spillway.model`, :mod:`spillway.config` and itself: no boto3, no kubernetes, no
environment, no clock (``now`` is an argument), no adapters, no act layer. The stages are described in
:mod:`spillway.planner.core`."""

from spillway.planner.core import plan
from spillway.planner.types import Drain, KeptNode, PendingPod, Placement, ScaleUp, ScalingPlan, Uncordon

__all__ = ["Drain", "KeptNode", "PendingPod", "Placement", "ScaleUp", "ScalingPlan", "Uncordon", "plan"]
