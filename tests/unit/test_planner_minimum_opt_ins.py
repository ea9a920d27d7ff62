"""What counts toward an elastic job's or a gang's minimum when a plan moves its pods.

The product's promise: no scale-down (consolidation, make room) kills a running job or takes it below
its minimum, whatever marks its pods carry. Built like test_planner_consolidation (m5.2xlarge nodes,
7910m CPU); each test reproduces a fault the adversarial review of the opt-ins found.
"""

from __future__ import annotations

from plan_world import World
from test_planner_consolidation import UNDER, VOLCANO_PG, _volcano_gang, kept, replicas

from spillway.planner import codes

SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def _mark(w: World, prefix: str, annotations: dict[str, str]) -> None:
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith(prefix):
            item["metadata"].setdefault("annotations", {}).update(annotations)


def test_a_volcano_gang_member_both_safe_to_evict_and_preemptable_counts_toward_min_member() -> None:
    """A Volcano job of four tasks at its minMember (4), two on a, two on b, c with room for two; each
    task is Volcano-preemptable and annotated safe-to-evict "true" as well. The safe-to-evict rule
    matched first, so the move's code was safe-to-evict and the gang count (kept for the preemptable
    code only) left it out: the plan drained a node and broke the gang at its minimum. Volcano's
    preemptable still holds for such a pod: it goes only while its gang keeps more than minMember."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 4}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"])
    _volcano_gang(w, b, ["train-2", "train-3"])
    _mark(w, "train-", SAFE)
    replicas(w, c, "pin", 1, cpu="4", annotations={})  # may not move: c stays, with room for two tasks

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    moved = [p for d in result.drain for p in d.pods if "/train-" in p]
    assert moved == [], f"evicted {moved} of a gang running at its minMember: {result.drain}"
    assert {kept(result)[a][0], kept(result)[b][0]} <= {codes.POD_NEVER, codes.RECEIVES_MOVED_PODS}
