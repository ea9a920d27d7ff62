"""Regions whose Auto Scaling read failed: what the plan does with their groups and nodes.

Observe stores a snapshot when some region's read failed and another's answered
(``ClusterSnapshot.regions_unread``); such a region's groups are the last read of them, carried while
that read is younger than ``max_node_provision_minutes`` and flagged (:attr:`NodeGroup.read_at`), or
left out after that. The plan asks nothing of such a group on a picture that old:

* no new node (:func:`unread_skip`: the scale-up skips it as it skips a group backed off, so its pods
  spill over to the groups read, as for a group that cannot launch);
* no drain of its nodes, idle, unready, consolidated or ahead of a scheduled action
  (:func:`unread_verdict`), nor of a node of the region whose group was left out;
* its desired capacity not yet joined still counts as launching for the pods it was raised for, as for
  a group read: the other regions do not launch for them again. A raise planned after its read, which
  the carried read cannot show, counts for as long as the group is carried (spillway.planner.raises);
  a Ready node in no group, of the region, a zone and a type the group launches, registered after the
  read and not Karpenter's nor another EKS node group's nor labelled against the group's template, is
  such a launch that joined, no longer coming
  (spillway.planner.context).

A spot interruption or rebalance notice is not the plan's (spillway.act.interrupt) and drains as before.
The plan names each such region among its ``problems``.
"""

from __future__ import annotations

from spillway.model.cluster import ClusterSnapshot, RegionUnread
from spillway.model.nodegroup import REGION_LABEL, NodeGroup
from spillway.planner import codes
from spillway.planner.context import Context, WorkNode, aware, iso
from spillway.planner.types import REGION_UNREAD, ConfigProblem


def _mark(snapshot: ClusterSnapshot, region: str | None) -> RegionUnread | None:
    return next((r for r in snapshot.regions_unread if r.region == region), None)


def _not_read(region: str, mark: RegionUnread | None) -> str:
    since = f" since {iso(aware(mark.since))}" if mark is not None else ""
    return f"the Auto Scaling groups of {region} were not read{since}"


def unread_reason(ctx: Context, group: NodeGroup) -> str:
    """Why ``group`` (carried from an earlier read) is neither grown nor shrunk."""
    read = f" (as read at {iso(aware(group.read_at))})" if group.read_at is not None else ""
    return (
        f"{group.name}: {_not_read(group.region, _mark(ctx.snapshot, group.region))}: the group{read} is "
        "neither grown nor shrunk until they are"
    )


def unread_verdict(ctx: Context, node: WorkNode) -> tuple[str, str] | None:
    """Why ``node`` is kept: its group was carried from an earlier read, or it is in no group while its
    region was not read (its group left out once its last read was too old); None otherwise."""
    group = node.group
    if group is not None:
        return (codes.REGION_UNREAD, unread_reason(ctx, group)) if group.unread else None
    if not ctx.snapshot.regions_unread:
        return None
    region = node.info.labels.get(REGION_LABEL)
    mark = _mark(ctx.snapshot, region)
    if mark is None:
        return None
    return codes.REGION_UNREAD, f"in no group this snapshot holds: {_not_read(mark.region, mark)}"


def unread_problems(snapshot: ClusterSnapshot) -> tuple[ConfigProblem, ...]:
    """One problem per region whose read failed, naming it, since when and the error."""
    return tuple(
        ConfigProblem(
            f"region {mark.region}",
            "Auto Scaling groups",
            f"{_not_read(mark.region, mark)} ({mark.error}): its groups are not scaled, their launches "
            "under way still count, and pods no other capacity holds go to the regions read"[:1000],
            REGION_UNREAD,
        )
        for mark in snapshot.regions_unread
    )
