"""What DescribeNodegroup said of EKS managed node groups, kept a few minutes per container.

cluster-autoscaler's AWS provider keeps each node group's answer in an expiration store for
``managedNodegroupCachedTTL``, 6 minutes, and a failed read as an empty entry for as long, "to limit
failed calls to the EKS API" (kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/managed_nodegroup_cache.go); its optional jitter clock makes an
entry expire 5 to 60 seconds early, spreading the calls. The proposal that brought the call
(cluster-autoscaler/proposals/circumvent-tag-limit-aws.md) gives the reason: EKS throttles Describe
calls. Observe runs every minute and asked every node group every time.

Kept here as long: an answer (:class:`~spillway.model.aws.EksNodegroup`, or the problem of a read EKS
refused or of a node group it does not know) is served for ``ttl_seconds`` less up to
``jitter_seconds``, by a fraction fixed per node group (the same in every container), so the node
groups a container reads at its start fall due over a minute, not at one observation. A throttled or
failed read is not kept (the adapter raises it). Unlike a launch template version, a node group's
labels, taints and tags change in place (UpdateNodegroupConfig, TagResource): a change reaches the
template of a group at zero up to ``ttl_seconds`` later, as in cluster-autoscaler. A node group deleted
and created again under its name is another node group, with an Auto Scaling group of its own: an
answer is kept with the groups it was read for, and a group it was not read for is asked again
(:meth:`NodegroupCache.get`), not served the deleted node group's labels and taints.

Keyed by (region, cluster, node group): cluster-autoscaler keys by the node group's name alone, which
two clusters may share. Bounded (the least recently used dropped first); shared by the threads that
observe the regions in parallel.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable

from spillway.model.aws import NodegroupRead

DEFAULT_TTL_SECONDS = 360.0  # cluster-autoscaler's managedNodegroupCachedTTL
DEFAULT_JITTER_SECONDS = 60.0  # its mngCacheMaxTTL: an entry expires up to this much early
DEFAULT_MAX_ENTRIES = 1024

#: (region, cluster, node group)
CacheKey = tuple[str, str, str]


class NodegroupCache:
    """DescribeNodegroup answers by (region, cluster, node group), each for its time to live."""

    def __init__(
        self,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        jitter_seconds: float = DEFAULT_JITTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"nodegroup cache size: must be at least 1, got {max_entries}")
        self.ttl_seconds = ttl_seconds
        self.jitter_seconds = jitter_seconds
        self.max_entries = max_entries
        self._clock = clock
        # answer, read at, the ARNs of the Auto Scaling groups it was read for
        self._kept: OrderedDict[CacheKey, tuple[NodegroupRead, float, frozenset[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def expires_after(self, key: CacheKey) -> float:
        """Seconds an answer for ``key`` is served: the TTL less a part of the jitter fixed by the key."""
        fraction = zlib.crc32(repr(key).encode()) / 2**32  # not ``hash``: the same in every container
        return self.ttl_seconds - self.jitter_seconds * fraction

    def get(self, key: CacheKey, groups: Iterable[str] = ()) -> NodegroupRead | None:
        """The answer kept for ``key``, or None (then dropped) when there is none, it is too old, or one
        of ``groups`` (Auto Scaling group ARNs) is not one it was read for: a group made since is of a
        node group made since, and a node group of the name read before it may have been deleted."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            if self._clock() - found[1] >= self.expires_after(key) or not found[2].issuperset(groups):
                del self._kept[key]
                return None
            self._kept.move_to_end(key)
            return found[0]

    def put(self, key: CacheKey, answer: NodegroupRead, groups: Iterable[str] = ()) -> None:
        """Keep ``answer`` for ``key``, as read now for the Auto Scaling groups ``groups`` (ARNs)."""
        with self._lock:
            self._kept[key] = (answer, self._clock(), frozenset(groups))
            self._kept.move_to_end(key)
            while len(self._kept) > self.max_entries:
                self._kept.popitem(last=False)
