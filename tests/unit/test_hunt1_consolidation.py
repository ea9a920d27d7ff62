"""Hunt 1: safety of consolidation and make room (failing tests for real bugs found by review).

Built like test_planner_consolidation: m5.2xlarge nodes (7910m CPU) in group ``cpu``.
"""

from __future__ import annotations

from plan_world import World
from test_planner_consolidation import UNDER, kept, replicas

from spillway.planner import codes

VOLCANO_PG = "scheduling.volcano.sh/v1beta1"


def _volcano_gang(w: World, node: str, names: list[str], cpu: str = "1500m") -> None:
    """Members of Volcano job ``train`` (PodGroup ``train``), each annotated volcano.sh/preemptable."""
    for name in names:
        (key,) = w.pods(
            name, 1, cpu=cpu, memory="1Gi", node_name=node, owner=("Job", "train"),
            labels={"volcano.sh/job-name": "train"},
            annotations={"scheduling.k8s.io/group-name": "train", "volcano.sh/preemptable": "true"},
        )  # fmt: skip
        item = w.pod_item(key)
        item["metadata"]["name"] = name
        item["metadata"]["ownerReferences"][0]["apiVersion"] = "batch.volcano.sh/v1alpha1"


def test_hunt1_consolidation_never_breaks_a_running_volcano_gang_at_its_min_member() -> None:
    """A Volcano job of four preemptable tasks runs as one gang (PodGroup minMember 4, Running): two
    tasks on node a, two on b, and c has room for two. Volcano itself preempts a preemptable task of a
    gang only while the job keeps more ready tasks than its minAvailable (volcano-sh/volcano
    pkg/scheduler/plugins/gang/gang.go, ``preemptableFn``: ``job.MinAvailable <= occupied-1``): at
    exactly minMember no task of it is a victim, since losing one breaks the gang (its peers cannot
    run without it). The product promises gangs are atomic. Consolidation took ``volcano.sh/preemptable``
    as a plain move opt-in and drained a (or b), evicting two tasks of a gang at its minimum."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 4}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"])
    _volcano_gang(w, b, ["train-2", "train-3"])
    replicas(w, c, "pin", 1, cpu="4", annotations={})  # may not move: c stays, with room for two tasks

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    moved = [p for d in result.drain for p in d.pods if "/train-" in p]
    assert moved == [], f"evicted {moved} of a gang running at its minMember: {result.drain}"
    assert {kept(result)[a][0], kept(result)[b][0]} <= {
        codes.POD_NEVER,
        codes.DOES_NOT_FIT,
        codes.RECEIVES_MOVED_PODS,
    }


def test_hunt1_a_volcano_gang_above_its_min_member_gives_up_only_what_it_has_above() -> None:
    """The same gang with minMember 2: two of its four tasks may go (Volcano's preemptableFn would take
    them), so one of a and b is consolidated, never both."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"])
    _volcano_gang(w, b, ["train-2", "train-3"])
    replicas(w, c, "pin", 1, cpu="1", annotations={})  # c has room for all four

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    moved = [p for d in result.drain for p in d.pods if "/train-" in p]
    assert len(moved) == 2, result.drain
