"""What a template node keeps back from its pods: by default what an EKS node of the type reserves
(kube-reserved from the type's vCPUs and max pods, the eviction threshold, the VM memory overhead); an
explicit ``node_reserve: {cpu, memory}`` keeps the flat amounts it names.

The expected figures are worked out here by hand, range by range, from the published formula, not
from the code under test."""

from __future__ import annotations

import math
from typing import Any

import pytest
from plan_world import World, pending_codes, pending_reasons, scale_up
from pydantic import ValidationError

from spillway.config import PlannerConfig

MIB = 2**20 * 1000  # one MiB in the planner's milli-units
GIB = 2**30 * 1000


def template(instance_type: str, **config: Any) -> dict[str, int]:
    world = World()
    world.group("g", instance_type)
    _, groups, _, _ = world.parsed(**config)
    (group,) = groups
    assert group.template is not None
    return dict(group.template.allocatable)


# (type, vCPUs, nominal MiB, max pods = ENIs x (IPv4 per ENI - 1) + 2)
TYPES = [
    ("m5.large", 2, 8192, 3 * 9 + 2),
    ("m5.24xlarge", 96, 393216, 15 * 49 + 2),
    ("p3.16xlarge", 64, 499712, 8 * 29 + 2),
]


def kube_reserved_cpu_milli(vcpus: int) -> int:
    """6 % of the first core, 1 % of the second, 0.5 % of the third and fourth, 0.25 % above four."""
    milli = vcpus * 1000
    ranges = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, milli, 25)]  # hundredths of %
    return sum((min(milli, end) - start) * share // 10000 for start, end, share in ranges if milli > start)


@pytest.mark.parametrize(("itype", "vcpus", "mib", "pods"), TYPES)
def test_the_default_template_is_what_an_eks_node_of_the_type_offers(
    itype: str, vcpus: int, mib: int, pods: int
) -> None:
    vm_overhead_mib = math.ceil(mib * 75 / 1000)  # Karpenter's default 7.5 %, whole MiB up
    kube_reserved_mib = 255 + 11 * pods
    eviction_mib = 100
    expected_memory = (mib - vm_overhead_mib - kube_reserved_mib - eviction_mib) * MIB
    allocatable = template(itype)
    assert allocatable["cpu"] == vcpus * 1000 - kube_reserved_cpu_milli(vcpus)
    assert allocatable["memory"] == expected_memory
    assert allocatable["pods"] == pods * 1000


def test_the_cpu_ranges_by_hand() -> None:
    # 2 vCPUs: 60m + 10m; 96 vCPUs: 60 + 10 + 10 + 92 x 2.5 = 310m; 64 vCPUs: 80 + 60 x 2.5 = 230m
    assert [kube_reserved_cpu_milli(n) for n in (2, 96, 64)] == [70, 310, 230]
    assert template("m5.large")["cpu"] == 1930
    assert template("m5.24xlarge")["cpu"] == 95690
    assert template("p3.16xlarge")["cpu"] == 63770


def test_a_big_type_no_longer_promises_the_memory_a_flat_reserve_left_it() -> None:
    # The review's case: 384 GiB less a flat 1 GiB promised ~7 GiB more than kube-reserved alone leaves.
    assert template("m5.24xlarge")["memory"] < (393216 - 8362 - 100) * MIB


def test_an_explicit_node_reserve_keeps_its_flat_meaning() -> None:
    allocatable = template("m5.24xlarge", node_reserve={"cpu": "100m", "memory": "1Gi"})
    assert allocatable["cpu"] == 96000 - 100
    assert allocatable["memory"] == 384 * GIB - GIB


def test_a_node_reserve_naming_only_memory_keeps_the_flat_cpu_of_before() -> None:
    allocatable = template("m5.large", node_reserve={"memory": "2Gi"})
    assert (allocatable["cpu"], allocatable["memory"]) == (2000 - 100, 8 * GIB - 2 * GIB)


def test_the_vm_memory_overhead_is_karpenters_fraction_and_can_be_lowered() -> None:
    allocatable = template("m5.24xlarge", node_reserve={"vm_memory_overhead_percent": 0.03})
    assert allocatable["memory"] == (393216 - math.ceil(393216 * 3 / 100) - 8362 - 100) * MIB
    assert allocatable["cpu"] == 96000 - 310  # the per-type CPU reserve still applies


def test_a_flat_reserve_takes_a_vm_overhead_only_when_asked() -> None:
    allocatable = template("m5.large", node_reserve={"memory": "1Gi", "vm_memory_overhead_percent": 0.1})
    assert allocatable["memory"] == (8192 - 820 - 1024) * MIB


@pytest.mark.parametrize("value", [7.5, -0.1, 1, float("nan")])
def test_a_vm_overhead_that_is_not_a_fraction_is_refused_naming_the_field(value: float) -> None:
    with pytest.raises(ValidationError) as info:
        PlannerConfig(node_reserve={"vm_memory_overhead_percent": value})
    err = info.value.errors()[0]
    assert err["loc"] == ("node_reserve", "vm_memory_overhead_percent")
    assert "fraction" in err["msg"]  # not refused as an unknown key


def test_a_pod_that_fits_the_nominal_memory_but_not_the_node_gets_no_launch() -> None:
    # 370 GiB fits the m5.24xlarge's nominal 384 GiB (and the flat template's 383 GiB), not the
    # ~365 GiB a real EKS m5.24xlarge offers.
    world = World()
    world.group("general", "m5.24xlarge")
    (pod,) = world.pods("big", 1, cpu="8", memory="370Gi")
    result = world.plan()
    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == "no-group-fits"
    assert "memory" in pending_reasons(result)[pod]


def test_a_pod_too_big_for_the_real_node_goes_to_a_bigger_type() -> None:
    world = World()
    world.group("general", "m5.24xlarge")
    world.group("memory", "r5.24xlarge")
    (pod,) = world.pods("big", 1, cpu="8", memory="370Gi")
    assert scale_up(world.plan()) == {"memory": (0, 1, [pod])}


@pytest.mark.parametrize(
    ("itype", "vcpus", "mib", "pods"), [("m6g.large", 2, 8192, 29), ("c7g.medium", 1, 2048, 8)]
)
def test_a_graviton_template_leaves_out_the_cma_memory_the_kernel_keeps(
    itype: str, vcpus: int, mib: int, pods: int
) -> None:
    # Karpenter's estimate (aws/karpenter-provider-aws pkg/providers/instancetype/types.go, memory):
    # an arm64 type's nominal memory less 64 MiB of CMA the kernel reserves, then the 7.5 % VM overhead
    # of what is left; kube-reserved and the eviction threshold as on every type.
    usable_mib = mib - 64
    vm_overhead_mib = math.ceil(usable_mib * 75 / 1000)
    expected_memory = (usable_mib - vm_overhead_mib - (255 + 11 * pods) - 100) * MIB
    allocatable = template(itype)
    assert allocatable["memory"] == expected_memory
    assert allocatable["cpu"] == vcpus * 1000 - kube_reserved_cpu_milli(vcpus)


def test_a_flat_reserve_on_graviton_keeps_its_flat_meaning() -> None:
    allocatable = template("m6g.large", node_reserve={"memory": "1Gi"})
    assert allocatable["memory"] == 8 * GIB - GIB
