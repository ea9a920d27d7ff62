"""Published on-demand prices of the node types a simulation is likely to use, in USD per hour.

Source: the Amazon EC2 On-Demand pricing page (https://aws.amazon.com/ec2/pricing/on-demand/), region
US East (N. Virginia), Linux, shared tenancy. These are the list prices published before AWS lowered the
P4 and P5 on-demand prices in June 2025; p4d and p5 cost less since then. Prices change: pass
``--price TYPE=USD`` to use today's, or your discounted rate. A node type missing here costs nothing
in the report (its cost shows as unknown), it is never guessed.
"""

from __future__ import annotations

PRICE_SOURCE = (
    "Amazon EC2 On-Demand pricing (aws.amazon.com/ec2/pricing/on-demand), us-east-1, Linux; "
    "list prices before the June 2025 P4/P5 reduction"
)

ON_DEMAND_USD_PER_HOUR: dict[str, float] = {
    # NVIDIA GPU, 8 GPUs a node
    "p3.16xlarge": 24.48,  # 8x V100 16 GB
    "p3dn.24xlarge": 31.212,  # 8x V100 32 GB
    "p4d.24xlarge": 32.7726,  # 8x A100 40 GB
    "p5.48xlarge": 98.32,  # 8x H100
    "g5.48xlarge": 16.288,  # 8x A10G
    # NVIDIA GPU, fewer GPUs a node
    "p3.2xlarge": 3.06,
    "p3.8xlarge": 12.24,
    "g4dn.12xlarge": 3.912,
    "g5.12xlarge": 5.672,
    # CPU
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "m5.4xlarge": 0.768,
    "c5.4xlarge": 0.68,
}
