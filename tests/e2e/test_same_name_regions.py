"""Two managed Auto Scaling groups of one name, ``gpu``, one in each region (per-region stacks name them
alike: a group's name is unique only in its region). Each is planned, raised and backed off on its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import HOME, WEST, Cloud

from spillway.adapters.aws import AwsAdapter
from spillway.errors import AwsThrottled


def twins(cloud: Cloud, pods: int, east_max: int = 8) -> None:
    """A busy-enough CPU group, an empty ``gpu`` group in each region, ``pods`` pending 1-GPU pods."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.group("gpu", region=HOME, max_size=east_max)
    cloud.group("gpu", region=WEST)
    cloud.wait_nodes(1)
    cloud.pending_gpu_pods("train", pods)


def test_the_primarys_gpu_at_max_size_overflows_to_the_gpu_group_of_the_other_region(cloud: Cloud) -> None:
    """Six pods, us-east-1's ``gpu`` at most 4: it grows 0 -> 4 and us-west-2's ``gpu`` 0 -> 2, each
    through SetDesiredCapacity in its own region, and all six nodes join. Keyed by name the two were one
    group to the plan, which refused the second (``refused_groups``): two pods waited with a region's
    GPU group empty beside them."""
    twins(cloud, 6, east_max=4)

    cloud.plan(cloud.stream_event(cloud.snapshot()))

    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    [plan] = [p for p in cloud.plans() if p["kind"]["S"] == "plan"]
    grown = [(s["region"], s["group"], s["from"], s["to"]) for s in json.loads(plan["plan"]["S"])["scale_up"]]
    assert grown == [(HOME, "gpu", 0, 4), (WEST, "gpu", 0, 2)]
    assert [c.desired for c in cloud.sim.calls_for("gpu", HOME)] == [4]
    assert [c.desired for c in cloud.sim.calls_for("gpu", WEST)] == [2]
    assert (cloud.desired("gpu", HOME), cloud.desired("gpu", WEST)) == (4, 2)
    assert len(cloud.kube.list("Node")) == 7
    raises = json.loads(cloud.state_item("state")["state"]["S"])["raises"]  # type: ignore[index]
    assert {k: (v["region"], v["group"], v["to"]) for k, v in raises.items()} == {
        f"{HOME}/gpu": (HOME, "gpu", 4),
        f"{WEST}/gpu": (WEST, "gpu", 2),
    }


def test_no_capacity_for_the_primarys_gpu_backs_off_that_group_only_and_the_other_takes_the_burst(
    cloud: Cloud,
) -> None:
    """us-east-1's ``gpu`` launches nothing (InsufficientInstanceCapacity): the execution backs it off
    (item ``backoff#us-east-1/gpu``, naming its region) and the re-plan raises us-west-2's ``gpu``, a
    group not backed off, in the same execution."""
    twins(cloud, 4)
    cloud.sim.capacity_outage("gpu", HOME)

    cloud.plan(cloud.stream_event(cloud.snapshot()))

    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    assert [c.desired for c in cloud.sim.calls_for("gpu", HOME)] == [4, 0]
    assert [c.desired for c in cloud.sim.calls_for("gpu", WEST)] == [4]
    assert (cloud.desired("gpu", HOME), cloud.desired("gpu", WEST)) == (0, 4)
    backoff = cloud.backoff_item(f"backoff#{HOME}/gpu")
    assert backoff is not None and (backoff["group"]["S"], backoff["region"]["S"]) == ("gpu", HOME)
    assert cloud.backoff_item(f"backoff#{WEST}/gpu") is None
    rounds = execution["output"]["rounds"]
    assert [[(g["region"], g["outcome"]) for g in r["groups"]] for r in rounds] == [
        [(HOME, "backed_off")],
        [(WEST, "ready")],
    ]


def observed_with_unread(cloud: Cloud, monkeypatch: pytest.MonkeyPatch, region: str) -> str:
    """A snapshot observed while ``region``'s Auto Scaling reads are throttled past the SDK's retries
    (as the adapter raises it), stored; its key."""
    read = AwsAdapter.node_groups_in

    def throttled(self: AwsAdapter, where: str, reserve: Any, now: Any = None) -> Any:
        if where == region:
            raise AwsThrottled(f"DescribeAutoScalingGroups({where}): Throttling: Rate exceeded")
        return read(self, where, reserve, now)

    with monkeypatch.context() as patch:
        patch.setattr(AwsAdapter, "node_groups_in", throttled)
        return cloud.snapshot()


@pytest.mark.parametrize(("unread", "grown"), [(WEST, HOME), (HOME, WEST)])
def test_one_region_unread_leaves_the_other_scaling(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, unread: str, grown: str
) -> None:
    """One region's Auto Scaling read fails when observed: that failed the whole observation, so nothing
    was planned anywhere. Now the snapshot is stored with the region unread, the plan names it among its
    problems, and the pods' nodes come from the other region's ``gpu`` (the primary's when the overflow
    region is unread; the overflow's when the primary is), through SetDesiredCapacity there only."""
    twins(cloud, 2)

    cloud.plan(cloud.stream_event(observed_with_unread(cloud, monkeypatch, unread)))

    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    [plan] = [json.loads(p["plan"]["S"]) for p in cloud.plans() if p["kind"]["S"] == "plan"]
    assert [(s["region"], s["group"], s["from"], s["to"]) for s in plan["scale_up"]] == [(grown, "gpu", 0, 2)]
    assert [(p["kind"], p["object"]) for p in plan["problems"]] == [("RegionUnread", f"region {unread}")]
    assert [c.desired for c in cloud.sim.calls_for("gpu", grown)] == [2]
    assert cloud.sim.calls_for("gpu", unread) == []
