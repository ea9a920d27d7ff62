"""A group at zero offers ``vpc.amazonaws.com/efa`` when its launch template attaches EFA interfaces.

The EFA device plugin advertises one ``vpc.amazonaws.com/efa`` for each EFA device of the node, and a
node has the EFA interfaces (``InterfaceType`` ``efa`` or ``efa-only``) its launch template attaches at
launch, at most one per network card (EKS User Guide, "Manage EFA devices on Amazon EKS"; EC2
DescribeInstanceTypes ``NetworkInfo.EfaInfo.MaximumEfaInterfaces``). A template without them gives a
node without EFA devices, whatever the type supports.
"""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, scale_up

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, LaunchTemplateVersionInfo, bundled_instance_types
from spillway.model.nodegroup import build_node_groups
from spillway.model.resources import EFA
from spillway.planner import codes

CATALOGUE = bundled_instance_types()


def efa_interfaces(count: int, kind: str = "efa") -> list[dict[str, Any]]:
    return [
        {"DeviceIndex": 0 if card == 0 else 1, "NetworkCardIndex": card, "InterfaceType": kind}
        for card in range(count)
    ]


def group(instance_type: str, efa: int | None, name: str = "train") -> dict[str, Any]:
    raw = o.asg(name, cluster="ml", instance_type=instance_type)
    raw["LaunchInstanceType"] = instance_type  # what the adapter reads of the launch template with the EFA
    if efa is not None:
        raw["LaunchEfaInterfaces"] = efa
    return raw


def template_efa(raw: dict[str, Any]) -> int | None:
    (built,) = build_node_groups([AutoScalingGroup.model_validate(raw)], [], CATALOGUE, {}, "ml")
    assert built.template is not None
    return built.template.allocatable.get(EFA)


def test_the_catalogue_knows_how_many_efa_interfaces_a_type_takes() -> None:
    assert CATALOGUE["p5.48xlarge"].efa_interfaces == 32
    assert CATALOGUE["p4d.24xlarge"].efa_interfaces == 4
    assert CATALOGUE["m5.xlarge"].efa_interfaces == 0


def test_a_launch_template_version_counts_its_efa_and_efa_only_interfaces() -> None:
    data = {"NetworkInterfaces": [*efa_interfaces(1), *efa_interfaces(3, "efa-only")[1:], {"DeviceIndex": 2}]}
    version = LaunchTemplateVersionInfo.model_validate(
        {"LaunchTemplateId": "lt-0abc", "VersionNumber": 3, "LaunchTemplateData": data}
    )

    assert version.efa_interfaces == 3  # the plain ENA interface is no EFA device


def test_a_group_whose_launch_template_attaches_efa_offers_it_at_zero() -> None:
    assert template_efa(group("p5.48xlarge", 32)) == 32_000
    assert template_efa(group("p4d.24xlarge", 4)) == 4_000
    assert template_efa(group("p5.48xlarge", 64)) == 32_000  # no more than the type takes
    assert template_efa(group("p5.48xlarge", None)) is None  # template not read, or attaches none
    assert template_efa(group("m5.xlarge", 1)) is None  # the type has none: EC2 launches no such node


def test_a_pod_asking_for_efa_gets_a_node_of_the_group_whose_template_attaches_it() -> None:
    w = World()
    w.groups["plain"] = group("p4d.24xlarge", None, "plain")
    w.groups["fabric"] = group("p4d.24xlarge", 4, "fabric")
    (pod,) = w.pods("nccl", 1, cpu="8", memory="64Gi")
    w.items[-1]["spec"]["containers"][0]["resources"]["limits"] = {EFA: "4"}
    (too_many,) = w.pods("greedy", 1, cpu="8", memory="64Gi")
    w.items[-1]["spec"]["containers"][0]["resources"]["limits"] = {EFA: "5"}

    result = w.plan()

    assert scale_up(result) == {"fabric": (0, 1, [pod])}
    assert pending_codes(result)[too_many] == codes.NO_GROUP_FITS
