"""The container's cache of what launch template versions and launch configurations say: bounded,
least recently used dropped first, configurations no group names forgotten."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from spillway.adapters.aws import _LaunchSettingsReader
from spillway.adapters.launch_cache import LaunchCache, LaunchFacts, config_key, version_key
from spillway.errors import SpillwayError

M5 = LaunchFacts("m5.large", "on-demand")
G5 = LaunchFacts("g5.xlarge", "spot")


def test_it_holds_no_more_than_its_bound_and_drops_the_least_recently_used() -> None:
    cache = LaunchCache(max_entries=2)
    first, second, third = (version_key("us-east-1", "lt-1", n) for n in (1, 2, 3))
    cache.put(first, M5)
    cache.put(second, G5)
    assert cache.get(first) == M5  # used: the second is now the least recently used

    cache.put(third, M5)

    assert len(cache) == 2
    assert cache.get(second) is None
    assert (cache.get(first), cache.get(third)) == (M5, M5)


def test_a_version_is_kept_per_region_and_template_id() -> None:
    cache = LaunchCache()
    cache.put(version_key("us-east-1", "lt-1", 1), M5)

    assert cache.get(version_key("us-west-2", "lt-1", 1)) is None
    assert cache.get(version_key("us-east-1", "lt-2", 1)) is None


def test_rechecks_are_spread_by_template_and_a_postponed_one_waits_a_whole_period() -> None:
    """Review r27: versions read together (a container's start) fell due at one observation, one call
    per template at once. Now each template falls due between 1 and 1 + spread periods after its read,
    at a point fixed by the template (the same in every container), all its versions together; a
    re-check EC2 refused is postponed: taken as read then."""
    now = [0.0]
    cache = LaunchCache(recheck_seconds=900, clock=lambda: now[0], recheck_spread=1 / 3)
    keys = [version_key("us-east-1", f"lt-{i:02d}", n) for i in range(30) for n in (1, 2)]
    for key in keys:
        cache.put(key, M5)

    now[0] = 899
    assert not any(cache.due(k) for k in keys)
    now[0] = 1050
    due = {k[2] for k in keys if cache.due(k)}
    assert 0 < len(due) < 30
    assert all(cache.due(k) == (k[2] in due) for k in keys)  # a template's versions together
    now[0] = 1200
    assert all(cache.due(k) for k in keys)

    cache.postpone(keys[0])
    assert not cache.due(keys[0]) and cache.get(keys[0]) == M5
    now[0] = 2400
    assert cache.due(keys[0])


def test_configurations_no_group_names_are_forgotten_in_that_region_only() -> None:
    cache = LaunchCache()
    cache.put(config_key("us-east-1", "lc-a"), M5)
    cache.put(config_key("us-east-1", "lc-b"), G5)
    cache.put(config_key("us-west-2", "lc-b"), G5)
    cache.put(version_key("us-east-1", "lt-1", 1), M5)

    cache.keep_configurations("us-east-1", {"lc-a"})

    assert cache.get(config_key("us-east-1", "lc-a")) == M5
    assert cache.get(config_key("us-east-1", "lc-b")) is None
    assert cache.get(config_key("us-west-2", "lc-b")) == G5
    assert cache.get(version_key("us-east-1", "lt-1", 1)) == M5


def test_template_ids_said_gone_are_bounded_and_cleared_when_found_again() -> None:
    cache = LaunchCache(max_entries=2)
    for template_id in ("lt-1", "lt-2", "lt-3"):
        cache.mark_gone("us-east-1", template_id)
    assert [cache.gone("us-east-1", t) for t in ("lt-1", "lt-2", "lt-3")] == [False, True, True]

    cache.mark_gone("us-east-1", "lt-2", gone=False)

    assert not cache.gone("us-east-1", "lt-2") and len(cache) == 1


def test_a_bound_below_one_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="launch_cache_size"):
        LaunchCache(max_entries=0)


def _error(code: str, op: str = "DescribeLaunchTemplates") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, op)


class _Ec2:
    """lt-b does not exist (EC2 fails any call naming it whole); the first lone call for lt-c is
    throttled."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.throttle_c = True

    def describe_launch_templates(self, **kw: Any) -> dict[str, Any]:
        ids = list(kw["LaunchTemplateIds"])
        self.calls.append(ids)
        if "lt-b" in ids:
            raise _error("InvalidLaunchTemplateId.NotFound")
        if ids == ["lt-c"] and self.throttle_c:
            self.throttle_c = False
            raise _error("RequestLimitExceeded")
        return {
            "LaunchTemplates": [
                {
                    "LaunchTemplateId": i,
                    "LaunchTemplateName": i,
                    "LatestVersionNumber": 1,
                    "DefaultVersionNumber": 1,
                }
                for i in ids
            ]
        }


class _Clients:
    def __init__(self, ec2: _Ec2) -> None:
        self._ec2 = ec2

    def ec2(self, region: str) -> _Ec2:
        return self._ec2


def test_an_id_ec2_said_is_gone_is_remembered_even_when_a_later_lone_call_of_the_split_fails() -> None:
    """EC2 fails a DescribeLaunchTemplates naming a missing id whole, so the ids are asked one by one; what
    that split learns (lt-b is gone) is kept though a later lone call is throttled. Before, it was lost,
    and the next observation failed the batch and split it all over again (review19)."""
    ec2 = _Ec2()
    cache = LaunchCache()
    reader = _LaunchSettingsReader(_Clients(ec2), cache, "us-east-1")  # type: ignore[arg-type]

    with pytest.raises(SpillwayError):
        reader._resolve_ids(["lt-a", "lt-b", "lt-c"])

    assert cache.gone("us-east-1", "lt-b"), ec2.calls
