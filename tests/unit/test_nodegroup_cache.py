"""What DescribeNodegroup said, kept per container for cluster-autoscaler's TTL (spillway.adapters.nodegroup_cache).

cluster-autoscaler keeps each node group's answer in an expiration store for
``managedNodegroupCachedTTL`` (6 minutes; kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/managed_nodegroup_cache.go), a failed read as an empty entry too;
its optional jitter expires an entry 5 to 60 seconds early, spreading the calls. Spillway keeps an
answer (a node group, or the problem of a refused read) as long, up to a minute less, fixed per node
group, so that the node groups read together at a container's start are not all asked again at once.
"""

from __future__ import annotations

import pytest

from spillway.adapters.nodegroup_cache import DEFAULT_TTL_SECONDS, NodegroupCache
from spillway.model.aws import EksNodegroup


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def nodegroup(label: str) -> EksNodegroup:
    return EksNodegroup(nodegroupName="batch-ng", clusterName="prod", labels={"workload-class": label})


def test_an_answer_is_served_until_the_ttl_and_not_after() -> None:
    clock = Clock()
    cache = NodegroupCache(clock=clock, jitter_seconds=0)
    key = ("us-east-1", "prod", "batch-ng")
    cache.put(key, nodegroup("batch"))

    clock.now += DEFAULT_TTL_SECONDS - 1
    kept = cache.get(key)
    clock.now += 1
    expired = cache.get(key)

    assert DEFAULT_TTL_SECONDS == 360  # cluster-autoscaler's managedNodegroupCachedTTL
    assert isinstance(kept, EksNodegroup) and kept.labels == {"workload-class": "batch"}
    assert expired is None


def test_a_refused_reads_problem_is_kept_as_an_answer() -> None:
    clock = Clock()
    cache = NodegroupCache(clock=clock)
    cache.put(("us-east-1", "prod", "gone"), "DescribeNodegroup(prod, gone): ResourceNotFoundException")

    assert (
        cache.get(("us-east-1", "prod", "gone")) == "DescribeNodegroup(prod, gone): ResourceNotFoundException"
    )


def test_the_same_names_in_another_region_are_another_node_group() -> None:
    cache = NodegroupCache(clock=Clock())
    cache.put(("us-east-1", "prod", "batch-ng"), nodegroup("batch"))

    assert cache.get(("us-west-2", "prod", "batch-ng")) is None


def test_entries_expire_up_to_the_jitter_early_fixed_per_node_group_and_spread_over_node_groups() -> None:
    keys = [("us-east-1", "prod", f"ng-{n}") for n in range(40)]
    lives = []
    for key in keys:
        clock = Clock()
        cache = NodegroupCache(clock=clock, ttl_seconds=360, jitter_seconds=60)
        cache.put(key, nodegroup("batch"))
        life = 0
        while cache.get(key) is not None:
            clock.now += 1
            life += 1
        lives.append(life)
        again = NodegroupCache(clock=Clock(), ttl_seconds=360, jitter_seconds=60)  # another container
        assert again.expires_after(key) == cache.expires_after(key)

    assert all(300 <= life <= 360 for life in lives)
    assert len(set(lives)) > 10  # spread, not all at one tick


def test_it_is_bounded_dropping_the_least_recently_used() -> None:
    cache = NodegroupCache(clock=Clock(), max_entries=2)
    a, b, c = (("us-east-1", "prod", n) for n in "abc")
    cache.put(a, nodegroup("a"))
    cache.put(b, nodegroup("b"))
    cache.get(a)
    cache.put(c, nodegroup("c"))

    assert (cache.get(a) is not None, cache.get(b), cache.get(c) is not None) == (True, None, True)


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        NodegroupCache(max_entries=0)


def test_an_answer_is_not_served_to_a_group_it_was_not_read_for() -> None:
    """A node group deleted and made again under its name gets a new Auto Scaling group (EKS API
    Reference, ``Nodegroup``: ``resources.autoScalingGroups``), with a new ARN: what was read for the
    groups of before describes the deleted one, however young the entry. A group of those gone (being
    deleted, so not asking) changes nothing."""
    old, other, new = (f"arn:aws:autoscaling:us-east-1:1:autoScalingGroup:{n}" for n in ("u1", "u2", "u3"))
    cache = NodegroupCache(clock=Clock())
    key = ("us-east-1", "prod", "batch-ng")
    cache.put(key, nodegroup("batch"), [old, other])

    same = cache.get(key, [old, other])
    fewer = cache.get(key, [other])
    for_a_new_group = cache.get(key, [new])

    assert isinstance(same, EksNodegroup) and isinstance(fewer, EksNodegroup)
    assert for_a_new_group is None
    assert cache.get(key, [old]) is None  # dropped
