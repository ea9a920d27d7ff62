"""Pod topology: where a pod may not go because of the pods already there.

kube-scheduler keeps a pod out of

* every domain of a required ``podAntiAffinity`` term's ``topologyKey`` (one node for
  ``kubernetes.io/hostname``, one zone for ``topology.kubernetes.io/zone``) that runs a pod the term
  selects, and every domain where a running pod's own term selects it;
* every node where a running pod holds a ``hostPort`` it asks for (same port and protocol, and host IP
  or either one every address: the NodePorts check), two of its own kind included;
* every domain of a ``whenUnsatisfiable: DoNotSchedule`` spread constraint where one more matching pod
  would put it more than ``maxSkew`` above the least loaded domain (the domains of the nodes that pass
  the pod's node selector and affinity; pods being deleted are not counted; the least is 0 while there
  are fewer than ``minDomains``);

and runs a pod with a required ``podAffinity`` term only in a domain where a pod the term selects runs
(the first of a group, whose term selects itself, may go anywhere).

A planner that ignored this would place the pending replicas of a "one per node" Deployment on the free
room of the node that runs one, a zone-spread replica on room in the zone that has the most, or a pod
that must join its cache on room in another zone: they would wait there for good, nothing launched.

The snapshot has matched the selectors (:class:`spillway.model.cluster.TopologyMatcher`); here
:class:`TopologyIndex` records which nodes run pods that own or match each, and
:meth:`TopologyIndex.domains` gives a pod's class its :class:`Domains`:

* ``forbidden``: per topology key, the domain values it may not enter (node names for the hostname);
* ``required``: per topology key, the only domain values it may enter (its pod affinity);
* ``per_node``: how many of the class a new node takes: 1 when its anti-affinity term selects the pod
  itself on the hostname or it takes a host port, ``maxSkew`` above the least loaded existing node for
  a spread over hostnames that counts it (:func:`_new_node_cap`); ``node_caps`` the same for the
  existing nodes such a spread still allows (``maxSkew`` + least - its count).

Pods this plan places beside each other are seen at the node level: every node (new, launching or
existing) keeps the :class:`Marks` of the classes planned onto it (their hostname anti-affinity terms,
the terms that select them, their host ports), and a class they repel goes elsewhere. A zone spread that
counts the class's own pods is a :class:`ZoneSpread`: it counts, as the plan goes, the pods placed in
each zone (existing, launching and new nodes alike), so a zone takes one more only while it stays within
``maxSkew`` of the least loaded zone, and a zone closed before the plan opens as the others catch up.
Scale-up places such a class in rounds until a round places nothing: a burst of a zone-spread Deployment
gets its nodes in every zone in one plan, evenly, as kube-scheduler will fill them. A zone the plan
opens a node in becomes a domain (kube-scheduler counts it once the node registers). A zone-keyed
anti-affinity term that selects the class's own pods is counted the same way (:class:`OnePerDomain`:
one pod per zone, over the plan's placements too). A required pod affinity over a zone follows pods
the plan places, and a zone-keyed anti-affinity term keeps away from them (:meth:`Domains.after`):
scale-up serves a class that follows others after them. A
hostname spread's least loaded node rises with the pods the plan puts on existing nodes
(:meth:`Domains.raised`): existing nodes take the class in passes, as kube-scheduler binds its pods one
at a time, before new nodes are filled up to ``maxSkew`` above that least.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from spillway.model.cluster import SPREAD_ALL_NODES, SPREAD_TOLERATED_NODES, NodeInfo, PodInfo, TaintT
from spillway.model.livetemplate import NODE_LABEL_PREFIXES, NODE_LABELS, TYPE_KEYS, ZONE_KEYS
from spillway.planner.predicates import HOSTNAME_LABEL, affinity_holds, selector_holds, untolerated_taint

UNBOUNDED = 1 << 40  # no cap on pods per node (placement's too)
# labels a new node carries whatever its group's template says: the kubelet's and the cloud provider's
# (a template leaves the zone and type out when the group may launch several), and those a template
# never takes from a node as they name one node. Not the capacity-type labels: only Karpenter's nodes,
# EKS managed node groups' (their template has it) and nodes labelled so carry one
ANY_NODE_KEYS = frozenset(
    {
        *NODE_LABELS,
        *ZONE_KEYS,
        *TYPE_KEYS,
        "kubernetes.io/os",
        "beta.kubernetes.io/os",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    }
)


@dataclass(frozen=True, slots=True)
class Marks:
    """What the pods of one class bring to a node that pods placed beside them in the same plan must
    respect: the hostname anti-affinity terms they own, the terms that select them, their host ports.
    (Running pods are the index's: :attr:`Domains.forbidden` already keeps a class off their nodes.)"""

    anti: frozenset[int] = frozenset()
    selected: frozenset[int] = frozenset()
    ports: frozenset[tuple[int, str, str]] = frozenset()

    def __or__(self, other: Marks) -> Marks:
        if not other:
            return self
        return Marks(self.anti | other.anti, self.selected | other.selected, self.ports | other.ports)

    def __bool__(self) -> bool:
        return bool(self.anti or self.selected or self.ports)

    def repels(self, other: Marks) -> bool:
        """Whether kube-scheduler keeps pods with these marks off a node that holds ``other``'s: a
        hostname anti-affinity term of either selects the other, or they ask for one host port."""
        if not self or not other:
            return False
        if self.anti & other.selected or other.anti & self.selected:
            return True
        return any(_clash(mine, theirs) for mine in self.ports for theirs in other.ports)


NO_MARKS = Marks()


def marks_of(pod: PodInfo) -> Marks:
    anti = frozenset(term for term, key in pod.anti_own if key == HOSTNAME_LABEL)
    return Marks(anti, frozenset(pod.selected_by), frozenset(pod.host_ports))


@dataclass(frozen=True, slots=True)
class Spot:
    """A node a plan puts pods on, as pod topology sees it: an existing node (its name) or a new or
    launching node of a group's template (no name)."""

    labels: Mapping[str, str]
    taints: tuple[TaintT, ...] = ()
    name: str | None = None


def counted_node(
    pod: PodInfo, flags: int, labels: Mapping[str, str], taints: Sequence[TaintT], name: str | None
) -> bool:
    """Whether a spread of ``pod`` with node inclusion ``flags`` counts a node (and the pods on it), as
    kube-scheduler's: those that pass the pod's node selector and required affinity
    (``nodeAffinityPolicy: Honor``, the default; every node with ``Ignore``), whatever their taints
    (``nodeTaintsPolicy: Ignore``, the default; only those whose NoSchedule and NoExecute taints it
    tolerates with ``Honor``). The pod's own affinity only: not what its volumes add
    (:attr:`PodInfo.own_terms`), which kube-scheduler's spread does not read."""
    terms = pod.required_terms if pod.own_terms is None else pod.own_terms
    if not flags & SPREAD_ALL_NODES and not (
        selector_holds(pod.node_selector, labels) and affinity_holds(terms, labels, name)
    ):
        return False
    return not (flags & SPREAD_TOLERATED_NODES and untolerated_taint(pod.tolerations, taints) is not None)


@dataclass(frozen=True, slots=True)
class ZoneSpread:
    """A ``DoNotSchedule`` spread over ``key`` (a zone) whose selector counts the class's own pods:
    ``counts`` the pods it selects per domain before the plan, ``eligible`` the domains of the nodes that
    pass the pod's node selector and affinity (the skew's least loaded domain is one of them)."""

    key: str
    skew: int
    min_domains: int
    counts: Mapping[str, int]
    eligible: frozenset[str]
    term: int = -1  # the spread's selector id
    pod: PodInfo | None = None  # whose node selector, affinity and tolerations pick the nodes it counts
    flags: int = 0  # its node inclusion policies
    # of ``counts``, per domain, the pods new nodes there may run first, or not, as EC2 launches one of
    # the group's types or another (groups.fresh_node_unsure)
    unsure: Mapping[str, int] = field(default_factory=dict)

    def joined(self, planned: Planned) -> ZoneSpread:
        """The spread with the pods of other classes it selects that this plan placed already counted,
        on the nodes it counts (two pending kinds of one Deployment share its skew; their zones become
        domains; a kind bound to other nodes counts for neither)."""
        entries = planned.selected.get(self.term)
        if not entries:
            return self
        counts, eligible = dict(self.counts), set(self.eligible)
        for spot, count in entries:
            if not self.counts_spot(spot):
                continue
            value = spot.labels.get(self.key)
            if value is not None:
                counts[value] = counts.get(value, 0) + count
                if count > 0:
                    eligible.add(value)
        unsure = dict(self.unsure)
        for spot, count in planned.unsure.get(self.term, ()):
            value = spot.labels.get(self.key)
            if value is not None and self.counts_spot(spot):
                unsure[value] = unsure.get(value, 0) + count
        return replace(self, counts=counts, eligible=frozenset(eligible), unsure=unsure)

    def counts_spot(self, spot: Spot) -> bool:
        """Whether the spread counts the node ``spot`` and the pods on it (:func:`counted_node`)."""
        return self.pod is None or counted_node(self.pod, self.flags, spot.labels, spot.taints, spot.name)

    def ceiling(
        self, value: str, settled: Mapping[tuple[str, str], int], opening: Iterable[Mapping[str, str]] = ()
    ) -> int:
        """The most pods domain ``value`` may hold: ``maxSkew`` above the least loaded domain, taken as of
        ``settled`` ((key, value) -> pods this plan had put there when the current round began: it only
        grows, so a round never places a pod the skew refuses). A domain the plan placed pods in counts
        as one (its new node registers there), and so do ``value`` and the domains of ``opening`` (the
        template labels of the groups that may still open a node for the class: a zone with no node
        yet holds the least at 0 from the round the plan could open one there, not only from the round
        after). With a single domain the skew is always 0: no ceiling.

        The pods new nodes may run first, or not, as EC2 picks their type (:attr:`unsure`), count in
        ``value`` but not in the other domains: the ceiling holds whichever type comes up. Were they
        there, ``value`` would hold more and the least could only rise as much; were they not, another
        domain would hold less, and so could the least (three zones, one of them able to hold one
        replica beside an amd64-only agent its m7g node may not run: counted there, the agent let the
        other two take a replica more than kube-scheduler lets them beside one)."""
        domains = (
            self.eligible | {value} | {d for k, d in settled if k == self.key} | _values_of(self.key, opening)
        )
        if len(domains) < self.min_domains:
            return self.skew
        if len(domains) == 1:
            return UNBOUNDED
        return self.skew + min(
            self.counts.get(d, 0)
            - (self.unsure.get(d, 0) if d != value else 0)
            + settled.get((self.key, d), 0)
            for d in domains
        )

    def held(self, value: str, placed: Mapping[tuple[str, str], int]) -> int:
        """The pods domain ``value`` holds: those running and those ``placed`` there by this plan."""
        return self.counts.get(value, 0) + placed.get((self.key, value), 0)


@dataclass(frozen=True, slots=True)
class OnePerDomain:
    """A required anti-affinity term over ``key`` (a zone) that selects the class's own pods: one pod per
    domain. (The domains where a pod it selects runs are closed already: ``Domains.forbidden``.)"""

    key: str

    def ceiling(
        self, value: str, settled: Mapping[tuple[str, str], int], opening: Iterable[Mapping[str, str]] = ()
    ) -> int:
        return 1

    def held(self, value: str, placed: Mapping[tuple[str, str], int]) -> int:
        return placed.get((self.key, value), 0)


# maxSkew, minDomains, counts, nodes counted, the spread's selector id
HostSpread = tuple[int, int, Mapping[str, int], frozenset[str], int]


@dataclass(frozen=True, slots=True)
class Domains:
    """What pod topology leaves a class (see the module docstring)."""

    forbidden: Mapping[str, frozenset[str]] = field(default_factory=dict)
    per_node: int = UNBOUNDED
    node_caps: Mapping[str, int] = field(default_factory=dict)
    required: Mapping[str, frozenset[str]] = field(default_factory=dict)  # the only domains it may enter
    marks: Marks = NO_MARKS  # what its pods bring to a node for the pods of this plan beside them
    # rules over a key other than the hostname that count the class's own pods (zone spreads, one per
    # zone): its placements fill their domains, so their room is counted as the plan goes
    counted: tuple[ZoneSpread | OnePerDomain, ...] = ()
    # its required pod affinity terms behind ``required``: (term id, topology key, the domains of the
    # running pods it selects)
    affinity: tuple[tuple[int, str, frozenset[str]], ...] = ()
    zone_anti: tuple[tuple[int, str], ...] = ()  # its required anti-affinity terms over other keys
    spread_keys: frozenset[str] = frozenset()  # its DoNotSchedule spreads' keys: a node needs each label
    # its hostname spreads that count it, for the cap of a new node once the plan's pods on existing
    # nodes count: (maxSkew, minDomains, pods per node, the nodes counted); and per_node without them
    host_spreads: tuple[HostSpread, ...] = ()
    per_node_without_spreads: int = UNBOUNDED
    # existing nodes its hostname spreads close now (apart from ``forbidden``: they reopen as the plan's
    # placements raise the least loaded node, :meth:`raised`)
    host_closed: frozenset[str] = frozenset()
    # its required pod affinity on the hostname selects its own pods and no running pod: its first pod
    # may go anywhere, and kube-scheduler then binds the others only to that pod's node
    leads_group: bool = False
    # its required pod affinity terms, all over keys other than the hostname (a zone), that select its
    # own pods and no running pod: its first pod may go anywhere, and the others then only into that
    # pod's domains (:meth:`led_to`)
    leads_zone: tuple[tuple[int, str], ...] = ()
    host_placed: Mapping[str, int] = field(default_factory=dict)  # the placements :meth:`raised` counted

    def blocker(
        self,
        labels: Mapping[str, str],
        node: str | None,
        fresh: Iterable[frozenset[int]] = (),
        joined: Iterable[frozenset[int]] = (),
    ) -> str | None:
        """Why a node (``node`` None: a new node of a template) is in a forbidden domain, or outside the
        domains its pod affinity requires, or None. ``fresh``: for a new node, the terms that select
        each pod it may run before any pending pod (its DaemonSets'): it is on the node itself, in the
        node's domain of every key, so one that a required anti-affinity term of the class selects
        closes the node; ``joined``: those of each pod it surely runs first, one that every required
        affinity term selects satisfies them."""
        missing = self._missing_key(labels, node)
        if missing is not None:
            return f"pod topology: the node has no {missing} label, which its topology spread needs"
        for key, values in self.forbidden.items():
            value = node if key == HOSTNAME_LABEL else labels.get(key)
            if value is not None and value in values:
                return f"pod topology: {key}={value} is closed to it (anti-affinity or topology spread)"
        if node is not None and node in self.host_closed:
            return f"pod topology: {HOSTNAME_LABEL}={node} is closed to it (topology spread)"
        if node is None and (fresh or joined):
            return self._new_node_blocker(labels, fresh, joined)
        return self._outside_required(labels, node)

    def _new_node_blocker(
        self, labels: Mapping[str, str], fresh: Iterable[frozenset[int]], joined: Iterable[frozenset[int]]
    ) -> str | None:
        """:meth:`blocker`'s pod affinity and anti-affinity verdict on a new node that may run pods the
        terms ``fresh`` select before any pending pod, and surely runs those ``joined`` select."""
        anti = self.marks.anti | {term for term, _ in self.zone_anti}
        if any(anti & selected for selected in fresh):
            return "pod topology: a pod a new node may run first (a DaemonSet's) is one its anti-affinity selects"
        if self.affinity and any(self._joins(selected) for selected in joined):
            return None
        return self._outside_required(labels, None)

    def _outside_required(self, labels: Mapping[str, str], node: str | None) -> str | None:
        """Why a node is outside the domains its pod affinity requires, or None."""
        for key, values in self.required.items():
            value = node if key == HOSTNAME_LABEL else labels.get(key)
            if value is None or value not in values:
                where = ", ".join(sorted(values)[:3]) + (" ..." if len(values) > 3 else "") or "none runs"
                return f"pod topology: its pod affinity requires the {key} of the pods it selects ({where})"
        return None

    def _joins(self, selected: frozenset[int]) -> bool:
        """Every required pod affinity term of the class selects a pod these terms select."""
        return all(term in selected for term, _, _ in self.affinity)

    def _missing_key(self, labels: Mapping[str, str], node: str | None) -> str | None:
        """A spread key an existing node lacks (kube-scheduler refuses such a node for a DoNotSchedule
        spread); a template node has no zone (EC2 picks it), so it lacks none."""
        if node is None:
            return None
        return min((k for k in self.spread_keys if k != HOSTNAME_LABEL and k not in labels), default=None)

    def missing_on_new_node(self, labels: Mapping[str, str], carried: Collection[str] | None) -> str | None:
        """A spread key a new node with the template ``labels`` will not carry: neither the template nor
        any node of its group (``carried``: the label keys they carry) has it, and it is no key every
        node gets whatever its template says (:data:`ANY_NODE_KEYS`: hostname, zone, instance type,
        capacity type... which a template leaves out when it cannot tell the value). kube-scheduler
        refuses a node without the key of a DoNotSchedule spread (kubernetes/kubernetes
        pkg/scheduler/framework/plugins/podtopologyspread/filtering.go, Filter: ErrReasonNodeLabelNotMatch),
        so a node launched for the pod would stay empty; cluster-autoscaler's template node fails the
        same filter. None when ``carried`` is not known."""
        if carried is None:
            return None
        return min(
            (k for k in self.spread_keys if k not in labels and k not in carried and not _any_node_key(k)),
            default=None,
        )

    def cap(self, node: str) -> int:
        """How many of the class the existing ``node`` may take."""
        return min(self.per_node, self.node_caps.get(node, UNBOUNDED))

    def on_node(self, node: str) -> int:
        """:meth:`cap`, and none where the hostname rules close ``node`` (:attr:`forbidden`,
        :attr:`host_closed`): what they leave an existing node, whatever its other labels."""
        if node in self.host_closed or node in self.forbidden.get(HOSTNAME_LABEL, ()):
            return 0
        return self.cap(node)

    def after(self, planned: Planned) -> Domains:
        """These domains with the pods this plan placed before the class counted as running (over keys
        other than the hostname: their new nodes' zones, say):

        * a required pod affinity term also admits the domains where the plan placed pods it selects:
          a pod that must join its cache's zone follows the cache's new node in the same plan instead of
          waiting for it to run;
        * a required anti-affinity term closes them, and so does a placed pod's term that selects the
          class: two kinds of pods that must not share a zone get new nodes in different zones;
        * a zone spread counts them where it selects them (:meth:`ZoneSpread.joined`);
        * a class whose waived terms (:attr:`leads_zone`) select them is no longer the first of its
          group: it follows them as a required pod affinity term does.

        (The hostname key is the node's: :class:`Marks`; joining a pending pod on its node is not
        planned.)"""
        if not (
            self.affinity
            or self.zone_anti
            or self.counted
            or self.leads_zone
            or planned.owning.keys() & self.marks.selected
        ):
            return self
        affinity, leads_zone = self.affinity, self.leads_zone
        if leads_zone and all(any(True for _ in planned.nodes(term)) for term, _ in leads_zone):
            # pods of another kind its terms select were placed first: the waiver is theirs, and it
            # follows them (kube-scheduler binds them first)
            affinity, leads_zone = tuple((term, key, frozenset()) for term, key in leads_zone), ()
        forbidden = self._forbidden_after(planned)
        return replace(
            self,
            forbidden={k: frozenset(v) for k, v in sorted(forbidden.items()) if v},
            affinity=affinity,
            leads_zone=leads_zone,
            required=_required_of(affinity, planned),
            counted=tuple(r.joined(planned) if isinstance(r, ZoneSpread) else r for r in self.counted),
        )

    def _forbidden_after(self, planned: Planned) -> dict[str, set[str]]:
        """:attr:`forbidden` with the domains :meth:`after` closes: where the plan placed pods a
        required anti-affinity term of the class selects, or pods whose term selects the class."""
        forbidden = {k: set(v) for k, v in self.forbidden.items()}
        for term, key in self.zone_anti:
            forbidden.setdefault(key, set()).update(_values_of(key, planned.nodes(term)))
        for term in self.marks.selected:
            for key, labels in planned.owning.get(term, ()):
                if (value := labels.get(key)) is not None:
                    forbidden.setdefault(key, set()).add(value)
        return forbidden

    def raised(self, placed: Mapping[str, int]) -> Domains:
        """These domains once ``placed`` (existing node -> pods of the class this plan put there) count
        under its hostname spreads: the least loaded existing node rises with them, so each existing
        node may take up to ``maxSkew`` above it, less what it holds (a node closed before may reopen:
        kube-scheduler binds the pods one at a time), and a new node, filled from empty, up to
        ``maxSkew`` above it (:func:`_new_node_cap`). Computed again from the counts before the plan and
        every pod placed so far, so it may be called after each pass."""
        if not self.host_spreads or not placed:
            return self
        new_node, caps, closed = host_rooms(self.host_spreads, placed)
        return replace(
            self,
            per_node=min(self.per_node_without_spreads, new_node),
            node_caps=caps,
            host_closed=closed,
            host_placed=dict(placed),
        )

    def new_node_cap(self, fresh: Sequence[frozenset[int]]) -> int:
        """:attr:`per_node` for a new node whose first pods (its DaemonSets') the terms ``fresh`` select
        (:func:`~spillway.planner.groups.fresh_node_selected`): a hostname spread that selects some of
        them counts them on the node before any pod of the class, so it takes that many fewer. kube-
        scheduler's PodTopologySpread counts every pod of a node its selector matches, in the pod's
        namespace (podtopologyspread/common.go, countPodsMatchSelector over nodeInfo.Pods), and
        cluster-autoscaler's template node runs the DaemonSet pods."""
        if not any(spread[4] in selected for spread in self.host_spreads for selected in fresh):
            return self.per_node
        new_node, _, _ = host_rooms(self.host_spreads, self.host_placed, fresh)
        return min(self.per_node_without_spreads, new_node)

    def with_fresh(
        self, spot: Spot, fresh: Sequence[frozenset[int]], nodes: int, unsure: Sequence[frozenset[int]] = ()
    ) -> Domains:
        """These domains once ``nodes`` new nodes at ``spot`` register running the pods they run first
        (their DaemonSets': ``fresh``, the terms selecting each; ``unsure``, those of them that run on
        some of the types the node may be only): a zone spread that selects some of them counts them in
        the node's zone (:meth:`ZoneSpread.joined`), as kube-scheduler counts every
        pod of a node its selector matches (podtopologyspread/common.go, countPodsMatchSelector, summed
        per domain in filtering.go calPreFilterState)."""
        if not fresh or not any(isinstance(rule, ZoneSpread) for rule in self.counted):
            return self
        opened = Planned()
        opened.record_fresh(spot, fresh, nodes, unsure)
        return replace(
            self, counted=tuple(r.joined(opened) if isinstance(r, ZoneSpread) else r for r in self.counted)
        )

    def zone_fresh(self, spot: Spot, fresh: Sequence[frozenset[int]]) -> int:
        """How many of the pods a new node at ``spot`` runs first (``fresh``: the terms selecting each)
        the class's zone spreads count in its zone, at most: each such pod takes a place the class's own
        pods would have there."""
        return max(
            (
                sum(1 for selected in fresh if rule.term in selected)
                for rule in self.counted
                if isinstance(rule, ZoneSpread) and rule.key in spot.labels and rule.counts_spot(spot)
            ),
            default=0,
        )

    def led_to(self, where: Mapping[str, str]) -> Domains:
        """These domains once the first pod of the class went to a node with the labels ``where`` (one
        value for each key of :attr:`leads_zone`): kube-scheduler waives a required pod affinity term
        that selects the pod itself only while no pod matches it anywhere (interpodaffinity/
        filtering.go, satisfyPodAffinity), so the others may enter that node's domains only."""
        affinity = tuple((term, key, frozenset({where[key]})) for term, key in self.leads_zone)
        return replace(self, affinity=affinity, required=_required_of(affinity), leads_zone=())

    def follows(self, selected: frozenset[int]) -> bool:
        """Whether pods with these ``selected`` term ids would open a domain this class's pod affinity
        has none of yet (see :meth:`after`)."""
        return any(
            key != HOSTNAME_LABEL and not values and term in selected for term, key, values in self.affinity
        )

    @property
    def node_specific(self) -> bool:
        return bool(
            self.forbidden.get(HOSTNAME_LABEL)
            or self.host_closed
            or self.node_caps
            or HOSTNAME_LABEL in self.required
        )


FREE = Domains()


@dataclass(slots=True)
class Planned:
    """Where this plan has placed pods so far, for the classes placed after them (:meth:`Domains.after`):
    per term id, the labels of the nodes holding pods the term selects (a negative count: pods the plan
    moves off such a node), and (with the term's key) of the nodes holding pods that own it as an
    anti-affinity term over a key other than the hostname. Scale-up records the pending pods it places,
    consolidation and make room the pods they move, so a zone spread counts every pod where the plan
    leaves it."""

    selected: dict[int, list[tuple[Spot, int]]] = field(default_factory=dict)  # with pods
    owning: dict[int, list[tuple[str, Mapping[str, str]]]] = field(default_factory=dict)
    following: set[int] = field(default_factory=set)  # required pod affinity terms of pods placed
    # of ``selected``, the pods new nodes may run first or not, as EC2 picks their type (with pods)
    unsure: dict[int, list[tuple[Spot, int]]] = field(default_factory=dict)

    def record(self, domains: Domains, spot: Spot, count: int) -> None:
        """``count`` pods of a class with ``domains`` went to node ``spot``."""
        for term in domains.marks.selected:
            self.selected.setdefault(term, []).append((spot, count))
        for term, key in domains.zone_anti:
            self.owning.setdefault(term, []).append((key, spot.labels))
        self.following.update(term for term, _, _ in domains.affinity)

    def record_fresh(
        self, spot: Spot, fresh: Sequence[frozenset[int]], nodes: int, unsure: Sequence[frozenset[int]] = ()
    ) -> None:
        """``nodes`` new nodes at ``spot`` register running the pods they run first (their DaemonSets'):
        ``fresh``, the terms selecting each of those pods. kube-scheduler counts them as any pod there
        (a zone spread in its zone, a pod affinity term's domain). ``unsure``: those of ``fresh`` the
        nodes run or not, as EC2 picks their type (:func:`~spillway.planner.groups.fresh_node_unsure`)."""
        for selected in fresh:
            for term in selected:
                self.selected.setdefault(term, []).append((spot, nodes))
        for selected in unsure:
            for term in selected:
                self.unsure.setdefault(term, []).append((spot, nodes))

    def left(self, pod: PodInfo, spot: Spot) -> None:
        """``pod`` moves off node ``spot``: the terms that select it count one less there (a zone its own
        anti-affinity term closed stays closed: at worst a move fewer)."""
        for term in pod.selected_by:
            self.selected.setdefault(term, []).append((spot, -1))

    def copy(self) -> Planned:
        return Planned(
            {t: list(v) for t, v in self.selected.items()},
            {t: list(v) for t, v in self.owning.items()},
            set(self.following),
            {t: list(v) for t, v in self.unsure.items()},
        )

    def nodes(self, term: int) -> Iterable[Mapping[str, str]]:
        """The labels of the nodes a plan placed pods ``term`` selects on."""
        return (spot.labels for spot, count in self.selected.get(term, ()) if count > 0)

    def sure_nodes(self, term: int) -> list[Mapping[str, str]]:
        """:meth:`nodes` less the new nodes that may run the pods ``term`` selects or not, as EC2 picks
        their type (:attr:`unsure`): a required pod affinity term may count only on a pod that will be
        there (the node is one entry of each, recorded together by :meth:`record_fresh`)."""
        doubt = Counter(id(spot) for spot, _ in self.unsure.get(term, ()))
        out = []
        for spot, count in self.selected.get(term, ()):
            if doubt[id(spot)] > 0:
                doubt[id(spot)] -= 1
            elif count > 0:
                out.append(spot.labels)
        return out


def _required_of(
    affinity: Iterable[tuple[int, str, frozenset[str]]], planned: Planned | None = None
) -> dict[str, frozenset[str]]:
    """Per topology key, the domains every required pod affinity term leaves (with ``planned``, over
    keys other than the hostname, also those where the plan placed pods a term selects)."""
    required: dict[str, frozenset[str]] = {}
    for term, key, values in affinity:
        if planned is not None and key != HOSTNAME_LABEL:
            values = values | _values_of(key, planned.sure_nodes(term))
        required[key] = required[key] & values if key in required else values
    return dict(sorted(required.items()))


def _leads_group(pod: PodInfo, affinity: tuple[tuple[int, str, frozenset[str]], ...]) -> bool:
    """The pod's required pod affinity on the hostname is waived as it is the first of its group
    (:meth:`TopologyIndex._affinity` left its terms out): :attr:`Domains.leads_group`."""
    return not affinity and any(key == HOSTNAME_LABEL for _, key in pod.affinity_own)


def _leads_zone(
    pod: PodInfo, affinity: tuple[tuple[int, str, frozenset[str]], ...]
) -> tuple[tuple[int, str], ...]:
    """The pod's required pod affinity terms, waived as it is the first of its group, when none is on
    the hostname (:attr:`Domains.leads_zone`; with one on the hostname: :attr:`Domains.leads_group`)."""
    if affinity or any(key == HOSTNAME_LABEL for _, key in pod.affinity_own):
        return ()
    return tuple(pod.affinity_own)


def _zone_anti(pod: PodInfo) -> tuple[tuple[int, str], ...]:
    return tuple((term, key) for term, key in pod.anti_own if key != HOSTNAME_LABEL)


def _values_of(key: str, nodes: Iterable[Mapping[str, str]]) -> frozenset[str]:
    return frozenset(v for labels in nodes if (v := labels.get(key)) is not None)


def host_rooms(
    spreads: Sequence[HostSpread], placed: Mapping[str, int], fresh: Sequence[frozenset[int]] = ()
) -> tuple[int, dict[str, int], frozenset[str]]:
    """Under hostname spreads that count the class, with ``placed`` (node -> pods of the class this
    plan put there) added to the counts: how many a new node takes (:func:`_new_node_cap`, less the
    pods it runs first that a spread selects: ``fresh``, the terms selecting each), how many more each
    existing node may take, and the existing nodes that may take none (kube-scheduler refuses a node
    that would stand more than maxSkew above the least loaded)."""
    per_node = UNBOUNDED
    caps: dict[str, int] = {}
    closed: set[str] = set()
    for skew, min_domains, counts, eligible, term in spreads:
        least = (
            0
            if len(eligible) < min_domains
            else min((counts.get(n, 0) + placed.get(n, 0) for n in eligible), default=0)
        )
        cap = _new_node_cap(skew, least, eligible, min_domains)
        if cap < UNBOUNDED:
            cap = max(0, cap - sum(1 for selected in fresh if term in selected))
        per_node = min(per_node, cap)
        for node in eligible | set(counts):
            room = skew + least - counts.get(node, 0) - placed.get(node, 0)
            if room < 1:
                closed.add(node)
            else:
                caps[node] = min(room, caps.get(node, UNBOUNDED))
    return per_node, caps, frozenset(closed)


def _new_node_cap(skew: int, least: int, eligible: frozenset[str], min_domains: int) -> int:
    """How many pods of a class a new node takes under a hostname spread that counts them: ``maxSkew``
    above the least loaded existing node. A new node joins empty and lowers the least only until
    kube-scheduler, which scores the emptiest node first, has filled it as far as the others; so three
    full nodes running one replica each leave new nodes room for two, and a node that runs none pins
    every node to ``maxSkew``. With no existing node among the domains the new nodes are the only ones,
    and nothing but their room caps them (unless ``minDomains`` holds the least at 0)."""
    if not eligible and min_domains <= 1:
        return UNBOUNDED
    return skew + least


def _one_per_domain(pod: PodInfo) -> Iterable[OnePerDomain]:
    """The pod's required anti-affinity terms over a key other than the hostname that select it."""
    for term, key in pod.anti_own:
        if key != HOSTNAME_LABEL and term in pod.selected_by:
            yield OnePerDomain(key)


@dataclass(frozen=True, slots=True)
class Leaving:
    """What pod topology does not count: the node a plan empties (gone with its pods; None: none) and
    the pods that leave their nodes (make room moves some pods off a node that stays)."""

    node: str | None = None
    pods: frozenset[str] = frozenset()


class TopologyIndex:
    """Per selector id: the anti-affinity term's topology key, the nodes running pods it selects, and
    the nodes running pods whose anti-affinity term it is."""

    def __init__(self, nodes: Mapping[str, NodeInfo], pods: Iterable[PodInfo]) -> None:
        self.nodes = nodes
        self.key: dict[int, str] = {}
        self.selected_on: dict[int, list[tuple[str, str]]] = {}  # id -> (node, pod key)
        # the same without the pods being deleted: a spread does not count them (kubernetes/kubernetes
        # pkg/scheduler/framework/plugins/podtopologyspread/common.go, countPodsMatchSelector), while
        # pod affinity and anti-affinity read every pod bound to a node (interpodaffinity/filtering.go)
        self.spread_on: dict[int, list[tuple[str, str]]] = {}
        self.owned_on: dict[int, list[tuple[str, str]]] = {}
        self.ports_on: dict[str, list[tuple[tuple[int, str, str], str]]] = {}  # node -> (port, pod key)
        for pod in pods:
            for term, key in pod.anti_own:
                self.key[term] = key
            if pod.node_name is None or pod.terminal:
                continue
            for port in pod.host_ports:
                self.ports_on.setdefault(pod.node_name, []).append((port, pod.key))
            for term in pod.selected_by:
                self.selected_on.setdefault(term, []).append((pod.node_name, pod.key))
                if not pod.terminating:
                    self.spread_on.setdefault(term, []).append((pod.node_name, pod.key))
            for term, _ in pod.anti_own:
                self.owned_on.setdefault(term, []).append((pod.node_name, pod.key))

    def domains(self, pod: PodInfo, leaving: Leaving = Leaving()) -> Domains:
        """The class of ``pod``, without what is ``leaving`` (pods a plan moves, the node it empties)
        and without the pod itself."""
        if not (pod.anti_own or pod.selected_by or pod.spread or pod.affinity_own or pod.host_ports):
            return FREE
        gone = Leaving(leaving.node, leaving.pods | {pod.key})
        forbidden = self._repelled(pod, gone)
        own = {term for term, key in pod.anti_own if key == HOSTNAME_LABEL}
        per_node = 1 if own & set(pod.selected_by) or pod.host_ports else UNBOUNDED
        taken = self._ports_taken(pod, gone)
        if taken:
            forbidden.setdefault(HOSTNAME_LABEL, set()).update(taken)
        node_caps: dict[str, int] = {}
        counted: list[ZoneSpread | OnePerDomain] = list(_one_per_domain(pod))
        hosts: list[HostSpread] = []
        host_closed: set[str] = set()
        spreads_cap = self._spreads(pod, gone, forbidden, node_caps, counted, hosts, host_closed)
        affinity = self._affinity(pod, gone)
        return Domains(
            {k: frozenset(v) for k, v in sorted(forbidden.items()) if v},
            min(per_node, spreads_cap),
            node_caps,
            _required_of(affinity),
            marks_of(pod),
            tuple(counted),
            affinity,
            _zone_anti(pod),
            frozenset(spread[1] for spread in pod.spread),
            tuple(hosts),
            per_node,
            frozenset(host_closed),
            _leads_group(pod, affinity),
            _leads_zone(pod, affinity),
        )

    def _spreads(
        self,
        pod: PodInfo,
        gone: Leaving,
        forbidden: dict[str, set[str]],
        node_caps: dict[str, int],
        counted: list[ZoneSpread | OnePerDomain],
        hosts: list[HostSpread],
        host_closed: set[str],
    ) -> int:
        """Every DoNotSchedule spread constraint of the pod; the cap of a new node (for a spread over
        hostnames that counts the pod itself, :func:`_new_node_cap`; else none). A spread over another
        key that counts the pod itself goes to ``counted`` (its placements fill the domains); any other
        closes the domains one more pod would skew too far (``forbidden``), and a hostname spread that
        counts the pod caps the nodes it leaves open (``node_caps``: a pod it does not select skews
        nothing) and closes the others apart (``host_closed``: the class's own placements reopen them)."""
        for term, key, skew, min_domains, flags in pod.spread:
            counts, eligible = self._counts(pod, term, key, gone, flags)
            own = term in pod.selected_by
            if own and key != HOSTNAME_LABEL:
                counted.append(ZoneSpread(key, skew, min_domains, counts, eligible, term, pod, flags))
                continue
            if own:  # over hostnames: host_rooms, counted again as the plan places (Domains.raised)
                hosts.append((skew, min_domains, counts, eligible, term))
                continue
            least = 0 if len(eligible) < min_domains else min((counts.get(d, 0) for d in eligible), default=0)
            for domain in eligible | set(counts):
                # kube-scheduler refuses a domain where its count stands more than maxSkew above the
                # least loaded (a spread that does not select the pod: it adds nothing to the count)
                if skew + least - counts.get(domain, 0) < 0:
                    forbidden.setdefault(key, set()).add(domain)
        per_node, caps, closed = host_rooms(hosts, {})
        node_caps.update(caps)
        host_closed.update(closed)
        return per_node

    def _ports_taken(self, pod: PodInfo, gone: Leaving) -> set[str]:
        """The nodes where a running pod holds a node port this pod asks for (kube-scheduler's
        NodePorts check: same port and protocol, and the same host IP or either one every address)."""
        return {
            node
            for node, held in self.ports_on.items()
            if node != gone.node
            and any(
                other not in gone.pods and _clash(mine, theirs)
                for mine in pod.host_ports
                for theirs, other in held
            )
        }

    def _repelled(self, pod: PodInfo, gone: Leaving) -> dict[str, set[str]]:
        """Per topology key, the domains anti-affinity closes: its own terms against the pods they
        select, and running pods' terms that select it."""
        forbidden: dict[str, set[str]] = {}
        for term, key in pod.anti_own:
            for value in self._values(key, self.selected_on.get(term, ()), gone):
                forbidden.setdefault(key, set()).add(value)
        for term in pod.selected_by:
            owner_key = self.key.get(term)
            if owner_key is not None:
                for value in self._values(owner_key, self.owned_on.get(term, ()), gone):
                    forbidden.setdefault(owner_key, set()).add(value)
        return forbidden

    def _affinity(self, pod: PodInfo, gone: Leaving) -> tuple[tuple[int, str, frozenset[str]], ...]:
        """Its required pod affinity terms, each with the domains it leaves the pod (per key,
        ``Domains.required`` takes what every term leaves): those of the running pods that every one
        of its terms selects, as kube-scheduler counts only a pod that matches them all (kubernetes/
        kubernetes pkg/scheduler/framework/plugins/interpodaffinity/filtering.go,
        updateWithAffinityTerms, podMatchesAllAffinityTerms). When no running pod does, the terms leave
        none, unless the pod matches them all itself (the first of a group may go anywhere, as
        kube-scheduler lets it): then they are left out."""
        if not pod.affinity_own:
            return ()
        where: dict[str, str] | None = None  # pod key -> node, of the pods every term selects
        for term, _ in pod.affinity_own:
            selected = dict((other, node) for node, other in self.selected_on.get(term, ()))
            where = selected if where is None else {k: n for k, n in where.items() if k in selected}
        both = [(node, other) for other, node in (where or {}).items()]
        out = [(term, key, frozenset(self._values(key, both, gone))) for term, key in pod.affinity_own]
        if all(not values for _, _, values in out) and all(t in pod.selected_by for t, _ in pod.affinity_own):
            return ()
        return tuple(out)

    def _counts(
        self, pod: PodInfo, term: int, key: str, gone: Leaving, flags: int
    ) -> tuple[dict[str, int], frozenset[str]]:
        """A spread's count of the pods it selects per domain (not those being deleted), and its domains,
        over the nodes it counts (:meth:`_eligible`)."""
        nodes = dict(self._eligible(pod, key, gone.node, flags))
        counts: dict[str, int] = {}
        selected = [(node, other) for node, other in self.spread_on.get(term, ()) if node in nodes]
        for value in self._values(key, selected, gone):
            counts[value] = counts.get(value, 0) + 1
        return counts, frozenset(nodes.values())

    def _eligible(
        self, pod: PodInfo, key: str, leaving: str | None, flags: int = 0
    ) -> Iterable[tuple[str, str]]:
        """The nodes a spread counts (:func:`counted_node`), with their ``key`` domain (the pods on a node
        not counted are not counted either, as kube-scheduler's). A node that lacks the key of any of the
        pod's spreads is a domain of none (kubernetes/kubernetes podtopologyspread/common.go,
        nodeLabelsMatchSpreadConstraints): it could not run the pod, and does not hold a least at 0."""
        keys = {k for _, k, _, _, _ in pod.spread if k != HOSTNAME_LABEL}
        for name, info in self.nodes.items():
            if name == leaving or not keys <= info.labels.keys():
                continue
            if not counted_node(pod, flags, info.labels, info.taints, name):
                continue
            value = name if key == HOSTNAME_LABEL else info.labels.get(key)
            if value is not None:
                yield name, value

    def _values(self, key: str, where: Iterable[tuple[str, str]], gone: Leaving) -> Iterable[str]:
        """The ``key`` domain of each (node, pod) in ``where``, but those ``gone``."""
        for node_name, other in where:
            if other in gone.pods or node_name == gone.node:
                continue
            if key == HOSTNAME_LABEL:
                yield node_name
                continue
            info = self.nodes.get(node_name)
            value = info.labels.get(key) if info else None
            if value is not None:
                yield value


def _any_node_key(key: str) -> bool:
    """A label every node gets from its kubelet or cloud provider, or one a template leaves out as it
    tells one node from another (spillway.model.livetemplate): a template without it says nothing."""
    return key in ANY_NODE_KEYS or key.startswith(NODE_LABEL_PREFIXES)


BIND_ALL = ("", "0.0.0.0")  # a host IP that is every address: unset, or 0.0.0.0 as NodePorts reads unset


def port_taken(ports: Iterable[tuple[int, str, str]], held: Iterable[tuple[int, str, str]]) -> str | None:
    """The first of ``ports`` one of ``held`` clashes with (:func:`_clash`), as ``port/protocol``, or
    None."""
    held = tuple(held)
    for port in sorted(ports):
        if any(_clash(port, theirs) for theirs in held):
            return f"{port[0]}/{port[1]}" + (f" on {port[2]}" if port[2] else "")
    return None


def _clash(mine: tuple[int, str, str], theirs: tuple[int, str, str]) -> bool:
    """Two host ports clash as kube-scheduler's NodePorts has it (HostPortInfo.CheckConflict): the same
    port and protocol, on the same host IP or with either one every address (unset or 0.0.0.0)."""
    port, protocol, ip = mine
    other_port, other_protocol, other_ip = theirs
    return (
        port == other_port
        and protocol == other_protocol
        and (ip in BIND_ALL or other_ip in BIND_ALL or ip == other_ip)
    )
