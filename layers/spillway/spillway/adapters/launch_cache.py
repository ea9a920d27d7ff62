"""What launch template versions and launch configurations say, kept for the container's life.

A launch template version never changes once it exists: to change a template, EC2 makes a new version
(EC2 User Guide, "Modify a launch template"); and a launch configuration cannot be modified at all.
So what a *numbered* version or a configuration says (the instance type, whether it launches Spot) is
read once and kept; ``$Latest`` and ``$Default`` are resolved to a number on every observation (the
adapter, :mod:`spillway.adapters.aws`). What a version says cannot change, but the version can be
deleted (DeleteLaunchTemplateVersions; a group that names it then launches nothing), and a fact kept
for the container's life hid that until a new container read it: a kept version is therefore asked
again once it was read ``recheck_seconds`` ago, or up to a third longer, the same for every version of a
template (:meth:`LaunchCache.due`: what a container reads at its start does not all fall due at one
observation), and dropped when EC2 answers that it does not exist
(``InvalidLaunchTemplateId.VersionNotFound``), so the next read asks for it anew and the group's
problems name it. A re-check that fails otherwise (throttled) is pushed back a whole period
(:meth:`LaunchCache.postpone`), not asked again at every observation. A template id EC2 said does not exist is remembered, so that it
is asked for alone from then on: EC2 fails a DescribeLaunchTemplates naming it whole, without saying
which id it did not find, and every other template would be asked for alone on every observation.

Bounded: at most ``max_entries`` facts (the least recently used dropped first) and as many ids.
Shared by the threads that observe the regions in parallel.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from spillway.model.nodegroup import CapacityType

DEFAULT_MAX_ENTRIES = 2048
# how long a kept launch template version is served before EC2 is asked again whether it still exists:
# one DescribeLaunchTemplateVersions per template this often, against one per observation uncached
DEFAULT_RECHECK_SECONDS = 900.0
# re-checks spread over recheck_seconds * (1 .. 1 + this), by template
DEFAULT_RECHECK_SPREAD = 1 / 3


@dataclass(frozen=True, slots=True)
class LaunchFacts:
    """What a launch template version or launch configuration says a group launches: its instance type
    (None when it names none), market (``spot`` when it asks for Spot, else ``on-demand``) and the EFA
    interfaces it attaches (a template version's; 0 for a launch configuration, which cannot)."""

    instance_type: str | None
    market: CapacityType
    efa: int = 0


def version_key(region: str, template_id: str, number: int) -> tuple[str, str, str, int]:
    return ("template", region, template_id, number)


def config_key(region: str, name: str) -> tuple[str, str, str]:
    return ("configuration", region, name)


class LaunchCache:
    """Facts by :func:`version_key` or :func:`config_key`, and the template ids EC2 last said do not
    exist (EC2's reads are eventually consistent: such an id is still asked for, alone)."""

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        recheck_seconds: float = DEFAULT_RECHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        recheck_spread: float = DEFAULT_RECHECK_SPREAD,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"launch_cache_size: must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self.recheck_seconds = recheck_seconds
        self.recheck_spread = recheck_spread
        self._clock = clock
        self._facts: OrderedDict[Hashable, tuple[LaunchFacts, float]] = OrderedDict()  # facts, read at
        self._gone: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._facts) + len(self._gone)

    def get(self, key: Hashable) -> LaunchFacts | None:
        with self._lock:
            found = self._facts.get(key)
            if found is None:
                return None
            self._facts.move_to_end(key)
            return found[0]

    def due(self, key: Hashable) -> bool:
        """Whether the kept ``key`` was read (or last postponed) long enough ago to be asked again
        whether it still exists (what it says cannot have changed): ``recheck_seconds`` times 1 to
        1 + ``recheck_spread``, by a fraction fixed per template (:func:`_spread`), so the versions read
        together at a container's start fall due over that span, each template's at once."""
        with self._lock:
            found = self._facts.get(key)
            wait = self.recheck_seconds * (1 + self.recheck_spread * _spread(key))
            return found is not None and self._clock() - found[1] >= wait

    def postpone(self, key: Hashable) -> None:
        """Take the kept ``key`` as read now without reading it: a re-check EC2 refused (throttled) is
        asked again a period later, not at every observation into a bucket still empty; what it says
        cannot have changed."""
        with self._lock:
            found = self._facts.get(key)
            if found is not None:
                self._facts[key] = (found[0], self._clock())

    def put(self, key: Hashable, facts: LaunchFacts) -> None:
        """Keep what ``key`` says, as read now."""
        with self._lock:
            self._facts[key] = (facts, self._clock())
            self._facts.move_to_end(key)
            while len(self._facts) > self.max_entries:
                self._facts.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        """Drop ``key``: EC2 said it no longer exists, so the next read asks for it again."""
        with self._lock:
            self._facts.pop(key, None)

    def gone(self, region: str, template_id: str) -> bool:
        """Whether EC2 said, when last asked, that the template id does not exist."""
        with self._lock:
            return (region, template_id) in self._gone

    def mark_gone(self, region: str, template_id: str, gone: bool = True) -> None:
        with self._lock:
            if not gone:
                self._gone.pop((region, template_id), None)
                return
            self._gone[(region, template_id)] = True
            self._gone.move_to_end((region, template_id))
            while len(self._gone) > self.max_entries:
                self._gone.popitem(last=False)

    def keep_configurations(self, region: str, names: Iterable[str]) -> None:
        """Drop what is kept of the region's launch configurations no group names now: a configuration
        can be deleted only once no group uses it, and then made again under its name saying something
        else, so a name is read anew when a group names it again."""
        keep = {config_key(region, n) for n in names}
        with self._lock:
            for key in [
                k for k in self._facts if isinstance(k, tuple) and k[:2] == ("configuration", region)
            ]:
                if key not in keep:
                    del self._facts[key]


def _spread(key: Hashable) -> float:
    """A fraction in [0, 1) fixed by the key's template (region and id; all its versions share one
    DescribeLaunchTemplateVersions) or configuration: the same in every container, unlike ``hash``."""
    whose = key[:3] if isinstance(key, tuple) and key[:1] == ("template",) else key
    return zlib.crc32(repr(whose).encode()) / 2**32
