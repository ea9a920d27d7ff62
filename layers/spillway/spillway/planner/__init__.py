"""The pure planner: no boto3, no kubernetes, no environment, no clock."""

from spillway.planner.core import plan
from spillway.planner.types import Drain, KeptNode, PendingPod, Placement, ScaleUp, ScalingPlan, Uncordon

__all__ = ["Drain", "KeptNode", "PendingPod", "Placement", "ScaleUp", "ScalingPlan", "Uncordon", "plan"]
