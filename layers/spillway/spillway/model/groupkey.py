"""A node group's identity: its region and its name.

An Auto Scaling group's name is unique only within its region (CreateAutoScalingGroup refuses a second
group of one name in the same account and region, nothing more), and per-region stacks often give the
same name to a group in each region. Everything the plan, its state and the ledger keep per group is
kept per :class:`GroupKey`. What users write by name (``groups:``, ``group_limits``, the priority
expander's regexes, ...) still matches by name, in every region.
"""

from __future__ import annotations

from typing import NamedTuple


class GroupKey(NamedTuple):
    region: str
    name: str

    @property
    def stored(self) -> str:
        """The key of the group's entries in the stored state (``groups``, ``raises``, ``templates``)
        and of its back-off item: ``<region>/<name>``. A region has no ``/``, so the first one ends it."""
        return f"{self.region}/{self.name}"
