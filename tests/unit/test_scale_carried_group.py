"""The scale-up execution for a group carried from an earlier read (its region's Auto Scaling read
failed: spillway.planner.unread).

The plan neither grows nor drains such a group, but it may still uncordon a node of it that Spillway
cordoned, for a pending pod: a Kubernetes write alone. The execution's steps run here as
statemachines/scale_up.asl.json runs them, on what the plan hands the execution.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots
from plan_world import NOW, World

from spillway.act.planning import PlanSettings, scale_up_groups
from spillway.act.scale import ScaleSteps
from spillway.config import PlannerConfig
from spillway.errors import AsgLimitExceeded, AsgNotFound, AwsError, InputError, SpillwayError
from spillway.model.act import StoredState
from spillway.model.cluster import RegionUnread
from spillway.model.snapshot import Snapshot
from spillway.planner import plan as run_planner

EAST, WEST = "us-east-1", "us-west-2"
LATER = NOW + timedelta(seconds=30)


class Refused(FakeCloud):
    """Auto Scaling refuses every call in ``region`` (a role that lost its permission there), as the
    adapter raises it: the read observe failed on, failing for the execution too."""

    def __init__(self, region: str) -> None:
        super().__init__(regions=(EAST, WEST), cluster="ml")
        self.refused = region

    def _call(self, method: str, *args: Any) -> None:
        super()._call(method, *args)
        if args and args[0] == self.refused:
            raise AwsError(f"{method}({self.refused}): AccessDenied: not authorized to perform this action")


def carried_world() -> tuple[Snapshot, list[str], FakeCluster]:
    """us-east-1's groups were last read two minutes ago: ``general`` (two nodes, the first cordoned by
    a plan's drain, the second busy) is carried; two pods fit on the cordoned node."""
    w = World(regions=(EAST, WEST))
    nodes = w.group("general", "m5.2xlarge", nodes=2, region=EAST)
    w.group("gpu-west", "g5.xlarge", region=WEST)
    w.cordon(nodes[0], by_spillway=True)
    w.pods("busy", 1, cpu="7", memory="20Gi", node_name=nodes[1], owner=("ReplicaSet", "busy"))
    w.pods("job", 2, cpu="2", memory="4Gi")
    cluster, groups, _, _ = w.parsed()
    read = NOW - timedelta(minutes=2)
    cluster = replace(cluster, regions_unread=(RegionUnread(EAST, read, "AwsError: AccessDenied"),))
    groups = [replace(g, read_at=read) if g.region == EAST else g for g in groups]
    kube = FakeCluster([i for i in w.items if i["kind"] == "Node"])
    return Snapshot.build(cluster, groups, NOW), nodes, kube


def iteration(steps: ScaleSteps, event: dict[str, Any]) -> dict[str, Any]:
    """One iteration of the Groups map, as scale_up.asl.json runs it and with what its Parameters pass
    each step (no retries: every failure here is one the state machine does not retry, or retries into
    the same answer)."""
    result = {"group": event["group"]["group"], "region": event["group"]["region"]}
    each = {k: event[k] for k in ("cluster", "group")}
    try:
        prep = steps.run({**event, "action": "prepare"})
        if prep["set"]:
            steps.run({**each, "action": "set_desired", "plan_id": event["plan_id"], "prep": prep})
        launch = steps.run({**each, "action": "verify", "prep": prep})
    except (AsgLimitExceeded, AsgNotFound) as exc:
        return {**result, "outcome": "refused", "error": type(exc).__name__, "cause": str(exc),
                "new_nodes": event["group"]["new_nodes"]}  # fmt: skip
    except SpillwayError as exc:
        return {**result, "outcome": "error", "error": type(exc).__name__, "cause": str(exc),
                "new_nodes": event["group"]["new_nodes"]}  # fmt: skip
    assert launch["status"] == "ready", launch  # nothing launches here
    return {**result, "outcome": "ready", "reason": launch["reason"]}


def test_uncordoning_a_carried_groups_node_asks_its_unreadable_region_nothing_and_backs_nothing_off() -> None:
    """The plan reuses a cordoned node of ``general``, whose region us-east-1 observe could not read
    (AccessDenied). The execution's prepare uncordoned the node, then read the group in us-east-1
    (DescribeAutoScalingGroups) for a raise there is none of: refused, the iteration ended ``Errored``
    with ``AwsError``, and next_round took that for a raise AWS refused for good and backed ``general``
    off, for ``launch_failure_backoff_minutes``: a read failure turned into a launch back-off the plans
    honour once the region reads again. Now the iteration of a carried group uncordons and asks Auto
    Scaling nothing: it ends ``ready``, nothing is backed off and the execution ends."""
    snapshot, nodes, kube = carried_world()
    planner = PlannerConfig(cluster="ml", regions=(EAST, WEST))
    plan = run_planner(snapshot.cluster, snapshot.groups, planner, StoredState().state, LATER)
    assert [u.node for u in plan.uncordon] == [nodes[0]] and plan.scale_up == ()
    [group] = scale_up_groups(plan, snapshot.groups)
    assert (group["group"], group["region"], group["grow"]) == ("general", EAST, False)

    cloud, ledger, snapshots = Refused(EAST), FakeLedger(), FakeSnapshots()
    ref = snapshots.add(snapshot)
    settings = PlanSettings(planner=planner, poll_seconds=1)
    steps = ScaleSteps(kube=kube, aws=cloud, ledger=ledger, snapshots=snapshots, settings=settings,
                       clock=lambda: LATER)  # fmt: skip
    event = {"cluster": "ml", "plan_id": "ml-p1", "round": 1, "poll_seconds": 1, "launch_timeout_seconds": 30,
             "group": group}  # fmt: skip

    result = iteration(steps, event)

    assert result["outcome"] == "ready", result
    assert not kube.get_node(nodes[0]).spec.unschedulable  # uncordoned
    assert [args for _, args in cloud.calls if args and args[0] == EAST] == []  # nothing asked of us-east-1
    out = steps.next_round({"action": "next_round", "cluster": "ml", "plan_id": "ml-p1", "snapshot_key": ref.key,
                            "round": 1, "max_rounds": 3, "rounds": [], "results": [result]})  # fmt: skip
    assert out["done"] is True and out["result"] == "launched", out
    assert ledger.backoffs == [] and ledger.stored.state.groups == {}


def test_only_a_carried_groups_entry_says_so_and_a_carried_group_is_never_grown() -> None:
    """The plan's entry for a group read carries no ``carried`` (a scale function older than the key
    would refuse it); a step given a carried group to grow refuses it, naming the field, before it asks
    or writes anything."""
    snapshot, nodes, kube = carried_world()
    read = [replace(g, read_at=None) for g in snapshot.groups]
    planner = PlannerConfig(cluster="ml", regions=(EAST, WEST))
    plan = run_planner(snapshot.cluster, read, planner, StoredState().state, LATER)
    [group] = scale_up_groups(plan, read)
    assert "carried" not in group and group["uncordon"] == [nodes[0]]

    cloud = Refused(EAST)
    steps = ScaleSteps(kube=kube, aws=cloud, ledger=FakeLedger(), snapshots=FakeSnapshots(),
                       settings=PlanSettings(planner=planner), clock=lambda: LATER)  # fmt: skip
    grown = {**group, "carried": True, "grow": True, "to": 3, "new_nodes": 1}
    with pytest.raises(InputError, match=r"group\.carried"):
        steps.run(
            {
                "action": "prepare",
                "cluster": "ml",
                "plan_id": "ml-p1",
                "round": 1,
                "poll_seconds": 1,
                "launch_timeout_seconds": 30,
                "group": grown,
            }
        )
    assert cloud.calls == [] and kube.called("uncordon") == []
