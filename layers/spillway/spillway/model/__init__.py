"""Models parsed from what the real APIs return (Kubernetes, EC2 Auto Scaling, EC2)."""
