"""Which instances Auto Scaling's own scale-in may terminate: the zones first, then the termination policy.

When a group's desired capacity drops below the instances it runs (a scheduled action's run), Auto
Scaling picks the instances to terminate itself (EC2 Auto Scaling User Guide, "Configure termination
policies"):

* **Zones first.** Keeping the group's Availability Zones balanced takes precedence over every
  termination policy: each instance is taken from the zone (or zones) with the most instances that
  holds at least one not protected from scale-in; when zones tie, the policy is applied across them.
  So ``n`` terminations come from the fullest zones, each brought down to the next level before any
  lower zone loses one (:func:`_per_zone`).
* **Then the policies, in their order** (``TerminationPolicies``), each deciding among the instances
  the previous ones left tied. What Spillway reads can predict only the launch-configuration
  criterion: ``Default`` takes instances launched from a launch configuration first, then from another
  launch template than the group's, then from the oldest version of the group's template;
  ``OldestLaunchTemplate`` the other templates, then the oldest version. The rest cannot be predicted
  from DescribeAutoScalingGroups: ``OldestInstance``, ``NewestInstance`` and
  ``ClosestToNextInstanceHour`` (and ``Default`` after its launch-template step) order by launch time,
  which it does not give; ``AllocationStrategy`` by the group's pools; ``OldestLaunchConfiguration`` by
  how old each configuration is; then a random pick. From the first such criterion on, every instance
  still tied may go.
* **Not predicted at all:** a custom termination policy (a Lambda function's ARN, first in the list)
  returns the instances it is ready to let go, any of them and when it chooses ("Create a custom
  termination policy with Lambda"); a group with a mixed instances policy first chooses between its
  Spot and On-Demand instances, which DescribeAutoScalingGroups does not tell apart ("Default
  termination policy and mixed instances groups"); a group whose instances' zones are not all known,
  one that runs an instance outside its zones, or holds some out of service (Standby), and a group
  read from a snapshot stored before its termination policies (and mixed instances policy) were read.
  Every unprotected instance may go then, and the answer says why.
* **Drains that may not have finished.** The instances that drains ahead of the action (and those
  under way) take out are gone when it runs only if those drains have finished by then; one that has
  not (an eviction slow or stuck, a failed drain that gives its node back) still counts in its zone,
  and the cut is larger by one, its drain not having decremented the desired capacity yet. The answer
  holds the instances left that are taken when every such drain has finished and those taken when
  none has (every partial case falls within the two: tests/unit/test_scheduled_scale_in.py checks it
  against an exhaustive model of Auto Scaling's choice over small random groups).

Pure: the group as observe read it, the instances left when the action runs, those whose drains may not
have finished by then, and how many go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.model.nodegroup import DEFAULT_POLICY as DEFAULT
from spillway.model.nodegroup import NodeGroup

# the criteria of a policy Spillway can follow, by policy name (the rest stop the prediction)
_BY_TEMPLATE = {DEFAULT: True, "OldestLaunchTemplate": False}  # True: launch configurations go first
# _in_zone's answers beside a policy's name: a launch-template step decided; Default's did, but left a tie
# its next step (the billing hour) breaks
_FOLLOWED, _HOUR = "@template", "Default@hour"
# what a policy orders by where Spillway cannot follow it, for the reason
_UNREAD = {
    "OldestInstance": "launch time",
    "NewestInstance": "launch time",
    "ClosestToNextInstanceHour": "launch time (the next billing hour)",
    DEFAULT: "launch source and launch time (the next billing hour)",
    "Default@hour": "launch time (the next billing hour)",
    "OldestLaunchTemplate": "launch source",
    "AllocationStrategy": "the group's allocation strategy",
    "OldestLaunchConfiguration": "launch configuration age",
}


@dataclass(frozen=True, slots=True)
class ScaleIn:
    """The instances Auto Scaling may terminate (a superset: each one it may pick), and how it picks
    them, said for a reason. ``custom``: the group's Lambda termination policy decides which and when."""

    instances: frozenset[str]
    how: str
    custom: str = ""


def is_custom(policy: str) -> bool:
    """A custom termination policy: a Lambda function's ARN (``arn:aws:lambda:...:function:...``)."""
    return policy.startswith("arn:") and ":lambda:" in policy


def scale_in(
    group: NodeGroup, left: Sequence[str], exempt: frozenset[str], count: int, unfinished: Sequence[str] = ()
) -> ScaleIn:
    """The instances of ``left`` (the group's live instances when the action runs) Auto Scaling may take
    when it terminates ``count`` of them; those in ``exempt`` (protected from scale-in) it never takes,
    though they count in their zone's balance. ``unfinished``: the group's instances that drains ahead of
    the action (or under way) take out, should those drains not have finished when it runs (an eviction
    slow or stuck, a failed drain that gives its node back): each then still counts in its zone, and the
    cut is larger by one (its drain has not decremented the desired capacity yet). The answer holds both
    the instances taken when every such drain has finished and those taken when none has."""
    free = [i for i in left if i not in exempt]
    policies = group.termination_policies
    if not policies:  # a snapshot stored before they were read: nor was the mixed instances policy
        return ScaleIn(frozenset(free), "any unprotected one may go: its termination policies were not read")
    custom = next((p for p in policies if is_custom(p)), "")
    if custom:
        how = (
            f"its termination policy is the Lambda function {custom}, which chooses which of them go and "
            "when, as it is ready to let them go: Spillway cannot predict it, so every unprotected one is "
            "counted"
        )
        return ScaleIn(frozenset(free), how, custom)
    if count >= len(free):
        return ScaleIn(frozenset(free), "every unprotected one goes")
    every = [*left, *unfinished]
    blind = _unknown_zones(group, every)
    if blind:
        return ScaleIn(frozenset(free), f"any unprotected one may go: {blind}")
    picked: set[str] = set()
    taken_from: set[str] = set()
    stops: list[str] = []
    cases = [(left, count)]  # every such drain finished ...
    if unfinished:
        cases.append((every, count + len(unfinished)))  # ... and none of them
    for live, cut in cases:
        chosen, zones, stop = _picked(group, live, exempt, cut)
        picked.update(chosen)
        taken_from.update(zones)
        stops.extend(stop)
    how = _how(group, sorted(taken_from), policies, stops, unfinished)
    return ScaleIn(frozenset(picked & set(free)), how)


def _picked(
    group: NodeGroup, live: Sequence[str], exempt: frozenset[str], count: int
) -> tuple[set[str], list[str], list[str]]:
    """The instances of ``live`` Auto Scaling may take when it terminates ``count`` of them, the zones it
    takes from, and where each zone's termination policies stopped (:func:`_in_zone`)."""
    zones, policies = _zones(group), group.termination_policies
    free = [i for i in live if i not in exempt]
    if count >= len(free):
        return set(free), sorted({zones[i] for i in free}), []
    plan = _per_zone([zones[i] for i in live], [zones[i] for i in free], count)
    picked: set[str] = set()
    stops: list[str] = []
    for zone, take in sorted(plan.items()):
        chosen, stop = _in_zone(group, [i for i in free if zones[i] == zone], take, policies)
        picked.update(chosen)
        stops.append(stop)
    return picked, sorted(plan), stops


def _zones(group: NodeGroup) -> dict[str, str]:
    """Each live instance's zone: as the group's answer gives it, or the group's one zone."""
    if len(set(group.zones)) == 1 and not group.instance_places:
        return {i: group.zones[0] for i in group.instance_ids}
    return {i: z for i, z, _ in group.instance_places if z}


def _unknown_zones(group: NodeGroup, left: Sequence[str]) -> str:
    """Why the zones Auto Scaling takes from cannot be told, or "" when they can."""
    if group.mixed_policy:
        return (
            "a mixed instances policy first chooses between its Spot and On-Demand instances, which "
            "DescribeAutoScalingGroups does not tell apart"
        )
    if group.held_instances:
        return "it holds instances out of service (Standby), whose place in the zones' balance is not known"
    zones = _zones(group)
    if any(zones.get(i) not in group.zones for i in left):
        return "not every instance's zone is known, or one runs outside the group's zones"
    return ""


def _per_zone(every: Sequence[str], free: Sequence[str], count: int) -> dict[str, int]:
    """How many instances each zone may lose when ``count`` go, the fullest zones first (``every``: each
    instance's zone, ``free``: each unprotected one's); a zone tied at the last step may lose one and
    is given one. Zones that lose none are left out."""
    size, room = Counter(every), Counter(free)
    take: Counter[str] = Counter()
    while count > 0:
        open_ = [z for z in room if room[z] > take[z]]
        top = max(size[z] - take[z] for z in open_)
        tied = sorted(z for z in open_ if size[z] - take[z] == top)
        for zone in tied:
            take[zone] += 1
        count -= len(tied)
    return dict(take)


def _in_zone(
    group: NodeGroup, free: Sequence[str], take: int, policies: Sequence[str]
) -> tuple[set[str], str]:
    """The unprotected instances of one zone that may be among the ``take`` it loses, by the policies in
    order: those ranked first by what Spillway can follow, every instance tied with the last of them
    included; and the policy whose order Spillway could not follow, :data:`_HOUR` when that is
    ``Default`` past its launch-template step, :data:`_FOLLOWED` when a launch-template step decided and
    none was needed, "" when nothing was."""
    ranks: dict[str, tuple[int, ...]] = {i: () for i in free}
    for policy in policies:
        if _decided(ranks, take):
            break  # the earlier policies told them apart: no later one decides
        step = _template_rank(group, free, policy)
        if step is None:
            return _first(ranks, take), policy
        ranks = {i: ranks[i] + step[i] for i in free}
        if policy == DEFAULT:  # then the billing hour, by launch time
            return _first(ranks, take), _FOLLOWED if _decided(ranks, take) else _HOUR
    return _first(ranks, take), _FOLLOWED if any(ranks.values()) else ""


def _decided(ranks: dict[str, tuple[int, ...]], take: int) -> bool:
    """The first ``take`` by rank are told apart from the rest: no tie across the cut."""
    order = sorted(ranks.values())
    return take >= len(order) or order[take - 1] != order[take]


def _first(ranks: dict[str, tuple[int, ...]], take: int) -> set[str]:
    """The ``take`` instances ranked first, and every one tied with the last of them."""
    order = sorted(ranks.values())
    cut = order[min(take, len(order)) - 1]
    return {i for i, rank in ranks.items() if rank <= cut}


def _template_rank(group: NodeGroup, free: Sequence[str], policy: str) -> dict[str, tuple[int, ...]] | None:
    """Each instance's place by what it was launched from, as ``policy`` orders them (lower goes first),
    or None when Spillway cannot follow it: not a launch-template criterion, a group launched from a
    launch configuration, or an instance whose launch source is not known (one from a launch
    configuration, under ``OldestLaunchTemplate``, which says nothing of them)."""
    lc_first = _BY_TEMPLATE.get(policy)
    current = group.launch_source
    if lc_first is None or not current.startswith("lt-") or "@" not in current:
        return None
    template, _, _ = current.partition("@")
    sources = dict(group.instance_sources)
    out: dict[str, tuple[int, ...]] = {}
    for instance in free:
        source = sources.get(instance, "")
        if source.startswith("lc:") and lc_first:
            out[instance] = (0, 0)
        elif source.startswith("lt-") and "@" in source:
            named, _, version = source.partition("@")
            out[instance] = (1, 0) if named != template else (2, int(version))
        else:
            return None
    return out


def _how(
    group: NodeGroup,
    zones: Sequence[str],
    policies: Sequence[str],
    stops: Sequence[str],
    unfinished: Sequence[str],
) -> str:
    """How Auto Scaling picks, for the reason: the instances being drained counted both ways (of
    ``unfinished``), the zones it takes from (of a group over several), its policies, whether what each
    instance was launched from narrowed them, and the order Spillway does not read where it had to stop."""
    where = ""
    if unfinished:
        where = (
            f"counting the {len(unfinished)} instance(s) being drained both as gone and as still there (a "
            "drain may not have finished when it runs), "
        )
    if len(set(group.zones)) > 1:
        where += (
            f"from {', '.join(zones)} (it evens the group's zones out before any termination policy), then "
        )
    named = f"{where}by its termination policy {' then '.join(policies)}"
    if _FOLLOWED in stops or _HOUR in stops:
        named += " (a launch configuration's instances, another launch template's, then older versions first)"
    stop = next((s for s in stops if s and s != _FOLLOWED), "")
    if not stop:
        return named
    return (
        f"{named}, whose order by {_UNREAD.get(stop, 'what it weighs')} Spillway does not read (any instance "
        "it leaves tied may go)"
    )
