"""The overflow re-plan of a scale-up execution (spillway.act.scale.ScaleSteps.next_round)."""

from __future__ import annotations

from datetime import timedelta

from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots
from plan_world import NOW, World

from spillway.act.planning import PlanSettings
from spillway.act.scale import ScaleSteps
from spillway.config import PlannerConfig
from spillway.model.act import StoredState
from spillway.model.snapshot import Snapshot
from spillway.model.state import RaiseState, State


def test_a_refused_raise_is_no_capacity_launching_for_the_replan() -> None:
    """Scenario: a plan saw group ``cpu`` at desired 2 (two busy nodes), MaxSize 4, and raised it 2 -> 4
    for two pending pods (recorded in ``State.raises``: to 4). Before the execution's ``prepare`` ran an
    operator lowered MaxSize to 3, so ``prepare`` refused the raise (2 + 2 above MaxSize 3:
    ``AsgLimitExceeded``, the state machine's ``Refused``) and nothing was set. The round's
    ``next_round`` re-plans on the live groups (desired 2, MaxSize 3).

    The rule (scale.py docstring: a refused group is re-planned "on the live groups"; raises.py: a
    raise is capacity launching only while it "may still be under way"): a raise AWS never got
    launches nothing. The re-plan took the refused raise for capacity launching (desired read as
    min(4, 3) = 3), put one pod on that phantom node, found the group at MaxSize for the other and
    launched nothing ("re-plan found nothing more to launch"); the plans after it did the same for
    ``scale_up_claim_minutes``. One node could have been launched at once."""
    w = World(regions=("us-east-1",))
    busy = w.group("cpu", "m5.2xlarge", nodes=2, max_size=3)
    for i, node in enumerate(busy):
        w.pods(f"busy{i}", 1, cpu="7", node_name=node, owner=("ReplicaSet", f"busy{i}"))
    w.pods("wait", 2, cpu="7")
    cluster, groups, _, _ = w.parsed()
    snapshots = FakeSnapshots()
    ref = snapshots.add(Snapshot.build(cluster, groups, NOW))
    cloud = FakeCloud(cluster="ml")
    cloud.node_groups_by_region = {"us-east-1": list(groups)}  # live: desired 2, MaxSize 3
    ledger = FakeLedger()
    ledger.stored = StoredState(
        state=State(raises={"cpu": RaiseState(to=4, since=NOW)}),
        version=1,
        snapshot_key=ref.key,
        plan_id="p1",
    )
    settings = PlanSettings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",)), poll_seconds=1)
    steps = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=ledger, snapshots=snapshots, settings=settings,
                       clock=lambda: NOW + timedelta(seconds=30))  # fmt: skip
    refused = {
        "group": "cpu",
        "region": "us-east-1",
        "outcome": "refused",
        "error": "AsgLimitExceeded",
        "cause": "us-east-1/cpu: desired capacity 2 + 2 is above MaxSize 3; not set",
        "new_nodes": 2,
    }  # fmt: skip  (the Refused state passes the nodes the group was to get)
    out = steps.next_round({"action": "next_round", "cluster": "ml", "plan_id": "p1", "snapshot_key": ref.key,
                            "round": 1, "max_rounds": 3, "rounds": [], "results": [refused]})  # fmt: skip
    grown = [(g["group"], g.get("from"), g.get("to")) for g in out["groups"] if g.get("grow", True)]
    assert grown == [("cpu", 2, 3)], out
    assert (
        ledger.stored.state.raises["us-east-1/cpu"].to == 3
    )  # the refused 2 no longer count; the re-plan's 1 does
