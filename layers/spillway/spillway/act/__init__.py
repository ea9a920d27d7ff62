"""Acting on plans: the plan cycle (:mod:`.planning`), the scale-up steps (:mod:`.scale`) and drains.

The planner (:mod:`spillway.planner`) decides; this package loads what it needs, records what it decided
and starts the state machines that carry it out. It sees the world only through :mod:`spillway.ports`
(adapters are passed in, so the recording fakes can stand in) and never imports an SDK.
"""
