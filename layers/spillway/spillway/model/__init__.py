"""Models parsed from what the real APIs return (Kubernetes, EC2 Auto Scaling, EC2), the compact
records the planner works on, and the plain data the steps pass around (:mod:`.act`, :mod:`.drain`).

Owns data and its validation; never imports an SDK, an adapter, the act layer or the planner."""
