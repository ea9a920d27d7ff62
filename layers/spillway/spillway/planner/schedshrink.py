"""Scale-down ahead of a scheduled action that lowers a group below the nodes it has.

An action that sets a group's DesiredCapacity, or its MaxSize, below the instances it has makes Auto
Scaling terminate the instances above it when the action runs, choosing them by the group's termination
policy (instances protected from scale-in excepted), with no drain: their pods are killed. So within
the window floors use (``scale_down_idle_minutes``: :func:`~spillway.planner.groups.group_ceiling`)
Spillway takes the group down to that size itself, by the ordinary drain-then-terminate with
decrement, and when the action runs Auto Scaling has nothing left to terminate:

* idle nodes first, whatever their idle timer (an unready node's too: its unready time), age,
  scale-in cap, cooldown or a capacity buffer's room in them (the action removes a node anyway, and a
  buffer's virtual pods are the lowest of all demand), those holding a buffer's room last;
* then busy nodes whose every pod may move (:meth:`~spillway.planner.consolidation.Consolidation.evacuate`:
  moved where they fit, else evicted to wait), least used first; a pod kept from consolidation only
  because the drain's deadline would cut its grace short (``grace-past-deadline``) may move here, as
  the action gives it no grace at all, and the nodes of such pods go after the others;
* never a node a protection keeps for good (scale-in protection, ``scale-down-disabled``,
  ``do-not-disrupt``, a cordon, a drain under way), nor one this plan's consolidation or an earlier
  drain ahead moves pods onto (judged idle before they were), nor one with a pod that must not be
  disturbed, nor below the group's MinSize (TerminateInstanceInAutoScalingGroup's decrement cannot go
  there), nor past the disruption budgets and PodDisruptionBudgets.

What it cannot drain is reported (:class:`~spillway.planner.types.GroupShrink`): the action, when it
runs, and the pods on the nodes left above its size that Auto Scaling may pick
(:mod:`spillway.planner.scalein`: its zones first, then its termination policies), and the instances it
cannot take, protected from scale-in, which the run leaves above the desired capacity it sets (such an
action is reported even when that is all it does). A group with one of Spillway's terminate lifecycle
hooks needs no drain ahead: the hook holds each instance Auto Scaling terminates until Spillway drained
its node.
So does a group whose warm pool reuses instances on scale-in (``InstanceReusePolicy.ReuseOnScaleIn``,
PutWarmPool): the instances the action scales in go back to the pool rather than being terminated, but
the terminate hook still holds each, in Warmed:Pending:Wait (EC2 Auto Scaling User Guide, "Use lifecycle
hooks with a warm pool"), and Spillway drains it there (:data:`spillway.model.drain.HOOK_WAIT_STATES`);
a drain ahead would terminate instances the pool was to keep.

A group whose Terminate process is suspended loses nothing: its scheduled actions still run,
but none of them starts a scale-in activity while the suspension lasts (EC2 Auto Scaling User Guide,
"How suspended processes affect other processes", Terminate), so the run lowers the desired capacity
and terminates no instance, a Pending one no more than an InService one. This is the group's own
scale-in, not a termination Spillway asks for: the per-instance rule of the drain step and of
scale-down (:func:`~spillway.model.nodegroup.terminate_holds`, which lets a Pending instance go) does
not apply, and no node is drained ahead of such a run.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from spillway.config import EMPTY, UNDERUTILIZED
from spillway.model.nodegroup import TERMINATE, NodeGroup
from spillway.model.schedule import Floor
from spillway.planner import codes
from spillway.planner.consolidation import Candidate, _never
from spillway.planner.context import WorkNode
from spillway.planner.groups import group_ceiling
from spillway.planner.scaledown import (
    _disabled,
    _draining,
    _pinned,
    _scale_in_protected,
    controllers_of_staying,
)
from spillway.planner.scalein import ScaleIn, scale_in
from spillway.planner.types import Drain, GroupShrink

if TYPE_CHECKING:
    from spillway.planner.scaledown import ScaleDownStage

# What keeps an idle node from an ordinary scale-down but not from a drain ahead of the action: timers,
# the per-plan cap, the cooldown, consolidation turned off, a floor of another action, room held for a
# capacity buffer (the lowest of all demand: no real pod is moved to keep it) (this one removes the node
# anyway)
WAIVED = frozenset(
    {
        codes.IDLE_BELOW_THRESHOLD,
        codes.RECENTLY_LAUNCHED,
        codes.SCALE_IN_CAP,
        codes.SCALE_DOWN_COOLDOWN,
        codes.CONSOLIDATION_OFF,
        codes.SCHEDULED_MIN,
        codes.BUFFER,
    }
)
# ... and what keeps a busy node from consolidation, besides its pods
WAIVED_BUSY = WAIVED | {
    codes.WORKLOAD,
    codes.UTILIZED,
    codes.SAVING_TOO_SMALL,
    codes.UNDERUTILIZED_NOT_LONG_ENOUGH,
    codes.LAUNCHING_THIS_PLAN,
    codes.DOES_NOT_FIT,
}


class ScheduledShrinks:
    """Drains ahead of the scheduled actions that lower groups, after the ordinary scale-down."""

    def __init__(self, stage: ScaleDownStage) -> None:
        self.stage = stage
        self.ctx = stage.ctx
        self.kept = {k.node: k for k in stage.kept}
        self.reports: list[GroupShrink] = []

    def run(self) -> list[GroupShrink]:
        for group in self.ctx.groups:
            ceiling = group_ceiling(self.ctx, group)  # carried, unread: its nodes are kept (planner.unread)
            # Terminate suspended: the run initiates no scale-in at all (module docstring), whatever
            # the state of each instance
            if ceiling is None or group.unread or group.suspension(TERMINATE) is not None:
                continue
            if self.excess(group, ceiling) > 0:
                self.shrink(group, ceiling)
            elif self.left(group) > ceiling.min_size and not group.drain_hooks:
                # every instance above its size is protected: the run terminates none, but leaves them
                # above the group's desired capacity
                self.report(group, ceiling, self._drained(group), Counter())
        drained = {d.node for d in self.stage.drains}
        self.stage.kept = [k for k in self.stage.kept if k.node not in drained]
        return self.reports

    def left(self, group: NodeGroup) -> int:
        """The nodes the group keeps after the drains under way and this plan's."""
        key = group.key
        return group.desired - self.stage.going_now().get(key, 0) - self.stage.removed.get(key, 0)

    def excess(self, group: NodeGroup, ceiling: Floor) -> int:
        """How many instances the action would terminate: those above its size, less the ones protected
        from scale-in (Auto Scaling terminates none of them)."""
        protected = len(set(group.protected_instances) & set(group.instance_ids))
        return min(self.left(group) - ceiling.min_size, self.left(group) - protected)

    def nodes(self, group: NodeGroup) -> list[WorkNode]:
        """The group's nodes still kept: idle ones first, then busy ones whose pods move with their whole
        grace, then the others (:meth:`_cut`), each part in scale-down's order (least useful, then
        oldest) but for the nodes holding a capacity buffer's room, which go after the others of their
        part: the buffer keeps its room when the action leaves a node for it."""
        found = [
            n
            for name, n in self.ctx.nodes.items()
            if n.group is not None and n.group.key == group.key and name in self.kept
        ]
        return sorted(
            found,
            key=lambda n: (
                n.workload > 0,
                self._cut(n),
                n.info.name in self.ctx.buffer_room,
                self.stage._order((n, self.ctx.now)),
            ),
        )

    def _cut(self, node: WorkNode) -> bool:
        """A busy node some of whose pods a drain's deadline would cut short (``grace-past-deadline``):
        drained ahead only after the nodes whose pods move with their whole grace."""
        return bool(node.workload) and bool(self.stage.consolidation().cut_short(node))

    def shrink(self, group: NodeGroup, ceiling: Floor) -> None:
        when = ceiling.describe()
        if group.drain_hooks:
            back = " or returns to its warm pool (ReuseOnScaleIn)" if group.reuse_on_scale_in else ""
            reason = (
                f"{when}: no drain ahead; Spillway's terminate lifecycle hook {', '.join(group.drain_hooks)} "
                f"holds each instance Auto Scaling terminates{back} then until Spillway has drained its node"
            )
            self.reports.append(GroupShrink(group.name, group.region, ceiling.min_size, reason))
            return
        refused: Counter[str] = Counter()
        for node in self.nodes(group):
            if self.excess(group, ceiling) <= 0:
                break
            why = self.drain(node, group, ceiling)
            if why is None:
                del self.kept[node.info.name]
            else:
                refused[why] += 1
        self.report(group, ceiling, self._drained(group), refused)

    def _drains(self, group: NodeGroup) -> list[Drain]:
        """This plan's drains that terminate a node of the group (its ordinary ones too: they go before
        the action as well)."""
        key = (group.name, group.region)
        return [d for d in self.stage.drains if d.terminate and (d.group, d.region) == key]

    def _drained(self, group: NodeGroup) -> list[str]:
        return [d.node for d in self._drains(group)]

    def remaining(self, group: NodeGroup) -> list[str]:
        """The group's live instances still in it when the action runs once the drains ahead of it have
        finished: not this plan's drains, nor those of drains under way (a make-room drain's node stays).
        The others still count when those drains have not finished (:meth:`_picks`)."""
        going = {d.instance_id for d in self._drains(group)}
        going.update(
            n.info.instance_id or ""
            for n in self.ctx.nodes.values()
            if n.group is not None
            and n.group.key == group.key
            and self.stage.drain_under_way(n)
            and n.info.name not in self.ctx.state.rooms
        )
        return [i for i in group.instance_ids if i not in going]

    def drain(self, node: WorkNode, group: NodeGroup, ceiling: Floor) -> str | None:
        """Drain ``node`` ahead of the action when nothing but what the action overrides keeps it; else
        the code of what keeps it."""
        kept = self.kept[node.info.name]
        if node.info.name in self.stage.receiving():  # kept as "idle" before consolidation moved pods there
            return codes.RECEIVES_MOVED_PODS
        if self.left(group) <= group.min_size:
            return codes.MIN_SIZE
        refused = self.stage.floors.refusal(node.info, group)  # a cluster total's minimum
        if refused is not None or node.info.instance_id is None:
            return refused[0] if refused is not None else codes.NO_INSTANCE_ID
        if not node.workload:
            return self._idle(node, kept.code, ceiling)
        waived = kept.code in WAIVED_BUSY or (kept.code == codes.POD_NEVER and self._only_cut(node))
        return self._busy(node, ceiling) if waived else kept.code

    def _idle(self, node: WorkNode, code: str, ceiling: Floor) -> str | None:
        """An idle node kept with ``code``: drained ahead when the action overrides what keeps it (the
        :data:`WAIVED` codes) and no lasting protection holds it; else the code of what keeps it."""
        if code not in WAIVED:
            return code
        # the first protection that held is all the kept node says: consolidation off is judged before
        # scale-down-disabled, do-not-disrupt and a pinned DaemonSet pod, which still hold; a buffer's
        # room before every protection of an idle node and a recent drain's claim (it counts as in use)
        held = code == codes.BUFFER
        if held and self.stage.claimed_at(node) is not None:
            return codes.DRAIN_PLANNED
        checks = (_draining, _scale_in_protected, _disabled, _pinned) if held else (_disabled, _pinned)
        lasting = next((v for check in checks if (v := check(self.ctx, node, self.ctx.now))), None)
        return lasting[0] if lasting is not None else self._empty(node, ceiling)

    def _only_cut(self, node: WorkNode) -> bool:
        """Every pod that keeps the node from a move is one whose grace the drain's deadline would cut
        short, and one at least: the action kills such a pod with no grace, the drain ahead with its
        deadline (:meth:`~spillway.planner.consolidation.Consolidation.moves_ahead`)."""
        moves = self.stage.consolidation().moves(node)
        never = [m for _, m in moves if not m.movable]
        return bool(never) and all(m.code == codes.POD_GRACE_PAST_DEADLINE for m in never)

    def _empty(self, node: WorkNode, ceiling: Floor) -> str | None:
        stage = self.stage
        assert node.group is not None and node.info.instance_id is not None
        # the expendable pods it evicts spend what the ordinary idle drain's do: budgets, backoffLimits,
        # elastic jobs' and gangs' minimums (a low priority lets a pod go, not its job below its minimum)
        taken = stage.expendable_taken(node)
        refused = stage._expendable_refusal(node, taken) or stage.budgets.refusal(
            node.group.key, stage.taken.get(node.group.key, 0), EMPTY, node.info.name
        )
        if refused is not None:
            return refused[0]
        stage.take(node)
        stage.spend_expendable(node, taken)
        pods = tuple(sorted(p.key for p in node.expendable))
        what = f"idle; evicts its {len(pods)} expendable pod(s)" if pods else "idle"
        if node.never_started:  # as the ordinary drain of a dead node says them
            what += f"; {stage._never_started(node)}"
        # a NotReady node's drain carries the unready time, as the ordinary one does: DrainNode then lets
        # its pods that never started go with it (act.drain.dead_node) rather than cancel for them
        unready = self.ctx.config_for(node.group).scale_down_unready_minutes if not node.info.ready else None
        stage.drains.append(
            Drain(
                node.info.name,
                node.info.instance_id,
                node.group.name,
                node.group.region,
                self._reason(node, ceiling, what),
                codes.SCHEDULED_SHRINK,
                pods,
                unready,
                controllers_of_staying(node),
            )
        )
        return None

    def _busy(self, node: WorkNode, ceiling: Floor) -> str | None:
        stage = self.stage
        assert node.group is not None
        # its youth and a buffer's room in it are waived, not what they hide
        verdict = stage.protected(node, young=False, buffer=False)
        if verdict is not None:
            return verdict[0]
        consolidation = stage.consolidation()
        consolidation.reset_room()
        moves = consolidation.moves_ahead(node)
        candidate = Candidate.of(node, moves, consolidation.restart_cost(node, moves))
        verdict = (
            _never(moves)
            or stage.budgets.refusal(
                node.group.key, stage.taken.get(node.group.key, 0), UNDERUTILIZED, node.info.name
            )
            or consolidation.evacuate(candidate)
        )
        if verdict is not None:
            return verdict[0]
        moved = stage.drains[-1]  # consolidation's drain: "consolidation: its N pod(s) fit on ...; ..."
        where = moved.reason.split("; ")[0].removeprefix(f"{codes.CONSOLIDATION}: ")
        if "no other node" in where:
            where += " (evicted, they wait as pending pods rather than die with the node)"
        cut = consolidation.cut_short(node)
        if cut:
            where += (
                f"; {len(cut)} of them with more grace than the drain has left to give them (their own, or a "
                "critical pod's after the others'), cut short at the drain's deadline rather than given none "
                "when the action runs"
            )
        reason = self._reason(node, ceiling, where)
        stage.drains[-1] = Drain(
            moved.node,
            moved.instance_id,
            moved.group,
            moved.region,
            reason,
            codes.SCHEDULED_SHRINK,
            moved.pods,
        )
        return None

    def _reason(self, node: WorkNode, ceiling: Floor, what: str) -> str:
        assert node.group is not None
        return (
            f"{codes.SCHEDULED_SHRINK}: {ceiling.describe()}, and Auto Scaling then terminates instances of "
            f"group {node.group.name} above it undrained; drained first ({what})"
        )

    def report(self, group: NodeGroup, ceiling: Floor, drained: list[str], refused: Counter[str]) -> None:
        """The action's entry: the drains ahead, then what its run does to the instances left above its
        size. Auto Scaling terminates, undrained, as many as it can (:func:`_taken`), picked as
        :func:`~spillway.planner.scalein.scale_in` tells, and the pods on the nodes it may pick are at
        risk; the rest are protected from scale-in and stay above the desired capacity the run sets."""
        left, size = self.left(group), ceiling.min_size
        remaining = self.remaining(group)
        exempt = frozenset(group.protected_instances) | frozenset(group.shielded_instances)
        free = len(set(remaining) - exempt)
        taken = _taken(left, size, len(remaining) - free)
        held = left - size - taken
        picks = self._picks(group, remaining, exempt, taken)
        at_risk: tuple[str, ...] = ()
        if taken > 0:
            at_risk = tuple(
                sorted(
                    key
                    for n in self.nodes(group)
                    if n.info.instance_id not in exempt
                    and (n.info.instance_id in picks.instances or n.info.instance_id not in remaining)
                    for key in self._on(n.info.name)
                )
            )
        what = f"drains {len(drained)} node(s) ahead of it" if drained else "drains none ahead of it"
        if taken > 0:
            what += self._undrained(taken, refused, len(at_risk), picks, free)
        if held > 0:
            what += (
                f"; {held} of its instances above it are protected from scale-in: Auto Scaling terminates "
                "none of them when it runs, and the group keeps them above the desired capacity it sets "
                "until their protection is removed, when Auto Scaling terminates them, undrained"
            )
        self.reports.append(
            GroupShrink(
                group.name,
                group.region,
                size,
                f"{ceiling.describe()}: {what}",
                tuple(drained),
                at_risk,
            )
        )

    def _on(self, node: str) -> list[str]:
        """The keys of the pods ``node`` runs when the action comes: those it runs now, and those this
        plan's drains move onto it (a node that receives them is not drained ahead, and may be one
        Auto Scaling terminates)."""
        consolidation = self.stage.consolidation()
        return [p.key for p in consolidation.on_node.get(node, ())] + consolidation.arrivals.get(node, [])

    def _picks(self, group: NodeGroup, remaining: list[str], exempt: frozenset[str], taken: int) -> ScaleIn:
        """The instances Auto Scaling may take when the action runs (:func:`~spillway.planner.scalein.
        scale_in`), whether the drains ahead of it and under way have finished by then or not (those that
        have not leave their instances in their zones, and the cut larger); every unprotected one when
        the instances Spillway sees are not those the group counts (some still launching, or above its
        desired capacity)."""
        unfinished = [i for i in group.instance_ids if i not in remaining]
        picks = scale_in(group, remaining, exempt, taken, unfinished)
        if len(remaining) != self.left(group) and not picks.custom:
            return ScaleIn(frozenset(i for i in remaining if i not in exempt), "")
        return picks

    @staticmethod
    def _undrained(taken: int, refused: Counter[str], pods: int, picks: ScaleIn, free: int) -> str:
        why = ", ".join(f"{code} on {n} node(s)" for code, n in sorted(refused.items()))
        when = "when its custom termination policy lets them go" if picks.custom else "when it runs"
        out = (
            f"; {taken} more of its instances go undrained {when} (its other nodes are kept: "
            f"{why or 'none is a node yet'}), with {pods} pod(s) at risk on them"
        )
        if picks.custom:
            return out + f"; {picks.how}"
        if picks.how and len(picks.instances) < free:
            return out + (
                f": Auto Scaling picks them {picks.how}, so {len(picks.instances)} of its {free} unprotected "
                "instances may be picked"
            )
        return out


def _taken(left: int, size: int, exempt: int) -> int:
    """How many of the ``left`` instances the run terminates to bring the group to ``size``: all above
    it but those protected from scale-in (``exempt``)."""
    return max(0, min(left - size, left - exempt))
