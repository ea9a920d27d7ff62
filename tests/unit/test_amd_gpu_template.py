"""An AMD GPU group's template offers ``amd.com/gpu``, the resource AMD's Kubernetes device plugin
registers for each GPU, as Karpenter's AWS provider counts a type's GPUs whose manufacturer is AMD
(aws/karpenter-provider-aws ``pkg/providers/instancetype/types.go``, ``amdGPUs``). Without it a group
of g4ad nodes at zero had no room for a pod asking for one, and was never scaled up for it."""

from __future__ import annotations

from typing import Any

import plan_world
import pytest
from plan_world import World, pending_codes, scale_up

from spillway.model.aws import InstanceTypeInfo, bundled_instance_types
from spillway.model.nodegroup import type_resources
from spillway.model.resources import NVIDIA_GPU

AMD_GPU = "amd.com/gpu"

# g4ad.xlarge as DescribeInstanceTypes answers it: 4 vCPUs, 16 GiB, one Radeon Pro V520 (AMD), two
# interfaces of 4 IPv4 addresses (EKS's eni-max-pods.txt: 8 pods)
G4AD_XLARGE: dict[str, Any] = {
    "InstanceType": "g4ad.xlarge",
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 16384},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "NetworkInfo": {"MaximumNetworkInterfaces": 2, "Ipv4AddressesPerInterface": 4},
    "GpuInfo": {
        "Gpus": [
            {"Name": "Radeon Pro V520", "Manufacturer": "AMD", "Count": 1, "MemoryInfo": {"SizeInMiB": 8192}}
        ],
        "TotalGpuMemoryInMiB": 8192,
    },
}


def test_an_amd_type_offers_its_gpus_as_amd_gpus_not_nvidia_ones() -> None:
    allocatable, _ = type_resources(InstanceTypeInfo.model_validate(G4AD_XLARGE), {})
    assert allocatable[AMD_GPU] == 1000
    assert NVIDIA_GPU not in allocatable
    assert AMD_GPU not in type_resources(bundled_instance_types()["g5.xlarge"], {})[0]


def test_a_pod_asking_for_an_amd_gpu_gets_a_node_of_an_amd_group_at_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalogue = {**bundled_instance_types(), "g4ad.xlarge": InstanceTypeInfo.model_validate(G4AD_XLARGE)}
    monkeypatch.setattr(plan_world, "bundled_instance_types", lambda: catalogue)
    w = World()
    w.group("amd", "g4ad.xlarge")
    (pod,) = w.pods("render", 1, cpu="1", memory="2Gi")
    (big,) = w.pods("twin", 1, cpu="1", memory="2Gi")
    w.items[-2]["spec"]["containers"][0]["resources"]["limits"] = {AMD_GPU: "1"}
    w.items[-1]["spec"]["containers"][0]["resources"]["limits"] = {AMD_GPU: "2"}  # more than it has

    result = w.plan()

    assert scale_up(result) == {"amd": (0, 1, [pod])}
    assert pending_codes(result)[big] == "no-group-fits"
