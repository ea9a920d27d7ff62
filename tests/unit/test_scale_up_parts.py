"""The parts of one plan's scale-up (a plan growing more groups than a round holds starts ``up-<plan>``,
``up-<plan>-2``, ...: :func:`spillway.act.planning.execution_requests`) each re-plan and raise as their
own: a re-plan's record and a raise's owner name the part, so one part never takes another's re-plan
for its own, nor its raises for retries of its own. Found by review62c."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fakes import FakeCloud, FakeCluster
from plan_world import NOW
from test_planning import Rig, pools_world, settings, snapshot_of

from spillway.act.planning import SnapshotRef
from spillway.act.scale import ScaleSteps
from spillway.model.history import MAX_SCALE_UP_GROUPS
from spillway.model.state import scale_up_owner

LATER = NOW + timedelta(seconds=30)
# what scale_up.asl.json passes NextRound and each iteration's Prepare, of the execution's input
NEXT_ROUND = ("cluster", "plan_id", "snapshot_key", "round", "max_rounds", "poll_seconds",
              "launch_timeout_seconds", "rounds", "part")  # fmt: skip
ITEM = ("cluster", "plan_id", "round", "poll_seconds", "launch_timeout_seconds", "part")


def two_parts() -> tuple[Rig, SnapshotRef, list[Any], ScaleSteps, FakeCloud]:
    """A plan growing one group more than a round holds: two scale-up executions, each of its own groups;
    the execution's steps on a cloud of the snapshot's groups (each raisable: MaxSize 8)."""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(pools_world(MAX_SCALE_UP_GROUPS + 1), NOW))
    rig.run(ref, now=NOW + timedelta(seconds=5))
    ups = [r for r in rig.executions.requests if r.kind == "scale_up"]
    cloud = FakeCloud(cluster="ml")
    for group in rig.snapshots.get("ml", ref.key).groups:
        cloud.node_groups_by_region.setdefault(group.region, []).append(group)
        cloud.add_group(group.name, [], region=group.region, desired=group.desired, max_size=8)
    scale = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=rig.ledger, snapshots=rig.snapshots,
                       settings=settings(), clock=lambda: LATER)  # fmt: skip
    return rig, ref, ups, scale, cloud


def refused(state: dict[str, Any], group: str) -> dict[str, Any]:
    """NextRound after round 1, whose raise of ``group`` prepare refused (its Refused state's result)."""
    result = {"group": group, "region": "us-east-1", "outcome": "refused", "new_nodes": 1,
              "error": "AsgLimitExceeded", "cause": "above MaxSize"}  # fmt: skip
    return {**{k: state[k] for k in NEXT_ROUND if k in state}, "action": "next_round", "results": [result]}


def raise_round(scale: ScaleSteps, state: dict[str, Any]) -> list[dict[str, Any]]:
    """Prepare and SetDesired of each group of the round ``state`` (NextRound's output) maps over."""
    out = []
    for group in state["groups"]:
        item = {k: state[k] for k in ITEM if k in state}
        prep = scale.run({**item, "action": "prepare", "group": group})
        each = {"cluster": state["cluster"], "plan_id": state["plan_id"], "group": group, "prep": prep}
        out.append({"prep": prep, "set": scale.run({**each, "action": "set_desired"})})
    return out


def test_each_part_of_a_plan_replans_its_own_refused_group_and_makes_its_raise() -> None:
    """Two executions of one plan, each with a group refused in round 1. The first re-planned its group
    for round 2 and raised it; the second's NextRound found that re-plan's record (one key per plan and
    round), took it for its own re-plan whose answer was lost, and mapped over the first's group under
    the first's owner: its raise read as a retry of one already asked and was never made, and its own
    refused group was never re-planned."""
    rig, ref, ups, scale, cloud = two_parts()
    [first, second] = ups
    mine, theirs = first.input["groups"][0]["group"], second.input["groups"][0]["group"]

    round2 = scale.run(refused(first.input, mine))
    [made] = raise_round(scale, round2)
    assert [g["group"] for g in round2["groups"]] == [mine] and made["set"]["raised"] == 1

    again = scale.run(refused(second.input, theirs))

    assert [g["group"] for g in again["groups"]] == [theirs], again
    [raised] = raise_round(scale, again)
    assert raised["set"]["raised"] == 1 and not raised["set"]["again"], raised
    assert cloud.describe_group("us-east-1", theirs).DesiredCapacity == 1
    assert raised["prep"]["owner"] != made["prep"]["owner"]
    # each re-plan has its own record, and the state's raise entries name each part's owner
    assert {ref.key + "#replan-2", ref.key + "#replan-2#part-2"} <= set(rig.ledger.plans)
    raises = rig.ledger.stored.state.raises
    assert raises[f"us-east-1/{theirs}"].owner == raised["prep"]["owner"]
    assert raises[f"us-east-1/{mine}"].owner == made["prep"]["owner"]


def test_two_parts_raising_one_group_in_one_round_are_two_owners_and_both_raises_are_made() -> None:
    """Two parts' re-plans may both grow one overflow group in the same round: under one owner the
    second raise read as the first's retry (its raise marker found asked) and added nothing."""
    _rig, _ref, ups, scale, cloud = two_parts()
    group = dict(ups[0].input["groups"][0], **{"from": 0, "to": 1})
    name = group["group"]
    raises = []
    for up in ups:
        state = {**up.input, "round": 2, "groups": [group]}
        [done] = raise_round(scale, state)
        raises.append(done)

    assert [r["set"]["raised"] for r in raises] == [1, 1], raises
    assert cloud.describe_group("us-east-1", name).DesiredCapacity == 2
    plan_id = ups[0].input["plan_id"]
    assert [r["prep"]["owner"] for r in raises] == [
        f"up-{plan_id}-2-us-east-1-{name}",  # the first part's, as before: its execution's name, round, group
        f"up-{plan_id}-2-2-us-east-1-{name}",  # the second's: its execution up-<plan>-2's name first
    ]
    assert raises[1]["prep"]["owner"] == scale_up_owner(plan_id, 2, "us-east-1", name, part=2)


def test_the_first_part_and_an_execution_without_a_part_keep_the_keys_they_had() -> None:
    """An execution an older build started carries no ``part``: it is the first part, and its re-plan's
    record and owners are those it had (no change for an execution in flight during a deploy)."""
    rig, ref, ups, scale, _cloud = two_parts()
    first = {k: v for k, v in ups[0].input.items() if k != "part"}
    mine = first["groups"][0]["group"]

    round2 = scale.run(refused(first, mine))
    [made] = raise_round(scale, round2)

    assert made["prep"]["owner"] == f"up-{first['plan_id']}-2-us-east-1-{mine}"
    assert ref.key + "#replan-2" in rig.ledger.plans
    assert ups[0].input.get("part", 1) == 1 and ups[1].input["part"] == 2


def test_the_plan_names_in_each_raise_entry_the_owner_its_part_raises_under() -> None:
    """The plan's raise entries name the owner of the scale-up that raises each group, so that the
    load marks an entry unsettled for that owner's lost raise alone: a second part's group's entry
    must name the second part's owner, the one its prepare gives the raise."""
    rig, _ref, ups, scale, _cloud = two_parts()
    raises = rig.ledger.stored.state.raises
    for up in ups:
        item = {k: up.input[k] for k in ITEM if k in up.input}
        for group in up.input["groups"]:
            prep = scale.run({**item, "action": "prepare", "group": group})
            assert raises[f"us-east-1/{group['group']}"].owner == prep["owner"], group["group"]
    assert prep["owner"].startswith(f"up-{ups[1].input['plan_id']}-2-1-us-east-1-")  # the second part's
