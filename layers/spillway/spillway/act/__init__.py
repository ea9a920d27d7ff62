"""Acting on plans: the plan cycle (:mod:`.planning`), the scale-up steps (:mod:`.scale`) and drains.

The planner (:mod:`spillway.planner`) decides; this package loads what it needs, records what it decided
and starts the state machines that carry it out. Adapters are passed in, so fakes can stand in.
"""
