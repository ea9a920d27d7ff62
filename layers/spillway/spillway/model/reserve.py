"""What a node keeps back from its pods: an instance type's nominal vCPUs and memory less the node's
allocatable, for the template node of a group that has no node to look at.

By default (:data:`EKS_RESERVE`) it is an estimate per instance type: what the EKS-optimized AMI
reserves (kube-reserved and the eviction threshold), after Karpenter's estimate of the memory the
VM itself takes.
Sources, checked against their code: amazon-eks-ami ``files/bootstrap.sh`` (AL2:
``get_memory_mebibytes_to_reserve``, ``get_cpu_millicores_to_reserve``, its ``evictionHard``) and
``nodeadm/internal/kubelet/config.go`` (AL2023: the same kubeReserved from the ENI max pods, the same
evictionHard); Karpenter (aws/karpenter-provider-aws ``pkg/providers/instancetype/types.go``:
``kubeReservedResources``, ``evictionThreshold``, ``memory``) estimates the same figures before launch.

* kube-reserved memory: 255 MiB, plus 11 MiB for each pod the node may run (the ENI max pods of
  eni-max-pods.txt, the template's pods before any resources tag);
* kube-reserved CPU: 6 % of the first core, 1 % of the second, 0.5 % of the third and the fourth,
  0.25 % of each core above four (each range rounded down to a millicore, as the AMI's shell does);
* the hard eviction threshold ``memory.available`` of 100 MiB, kept as well;
* the VM memory overhead: the share of the nominal memory the kernel and hypervisor take before the
  kubelet counts capacity. Karpenter's ``vmMemoryOverheadPercent`` (a fraction, default 0.075, taken
  off the nominal MiB and rounded up to a whole MiB). Launched nodes show that some overhead is always
  there: Karpenter's measured table (``zz_generated.memory_overhead.go``) has m5.large 0.55 GiB short
  of its nominal memory, m5.24xlarge 10.3 GiB, p3.16xlarge 7.8 GiB; 7.5 % errs on the side of
  promising less, except on the smallest types (c5.large: 10.6 % measured);
* on arm64 (Graviton) types, 64 MiB more the kernel keeps for its contiguous memory allocator (CMA)
  before the VM overhead is taken, as Karpenter's ``memory`` takes it off: a flat reserve without a
  VM overhead keeps its flat meaning.

Ephemeral storage (kube-reserved 1 GiB, ``nodefs.available`` 10 %) is not modelled: the catalogue does
not know a node's root volume, and a template node has ephemeral storage only from a resources tag.

A flat reserve (the planner config's ``node_reserve: {cpu, memory}``) is the same amount on every type,
with no eviction threshold and, unless asked for, no VM overhead: the user who sets it knows the nodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from spillway.model.resources import CPU, MEMORY

_MIB = 2**20 * 1000  # one MiB in milli-bytes
KARPENTER_VM_MEMORY_OVERHEAD = 0.075
KUBE_RESERVED_MIB_BASE = 255
KUBE_RESERVED_MIB_PER_POD = 11
EVICTION_HARD_MIB = 100
ARM64_CMA_MIB = 64
# kube-reserved CPU: (from millicore, to millicore, share in hundredths of a percent)
_CPU_RANGES = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, None, 25))


def kube_reserved_cpu(vcpus: int) -> int:
    """Millicores an EKS node of ``vcpus`` vCPUs keeps for the kubelet and the container runtime."""
    total = vcpus * 1000
    kept = 0
    for start, end, share in _CPU_RANGES:
        if total > start:
            top = total if end is None else min(total, end)
            kept += (top - start) * share // 10000
    return kept


def kube_reserved_memory_mib(max_pods: int) -> int:
    """MiB an EKS node that may run ``max_pods`` pods keeps for the kubelet and the container runtime."""
    return KUBE_RESERVED_MIB_BASE + KUBE_RESERVED_MIB_PER_POD * max_pods


def vm_overhead_mib(memory_mib: int, fraction: float) -> int:
    """The nominal memory's share the kubelet never reports as capacity, rounded up to a MiB."""
    return math.ceil(Fraction(str(fraction)) * memory_mib)


@dataclass(frozen=True, slots=True)
class Reserve:
    """How a template node's allocatable CPU and memory follow from its instance type.

    ``flat`` (milli-units by resource): that amount on every type; None: EKS's per-type reserve.
    ``vm_memory_overhead``: the fraction of the nominal memory that never becomes capacity."""

    flat: tuple[tuple[str, int], ...] | None = None
    vm_memory_overhead: float = KARPENTER_VM_MEMORY_OVERHEAD

    @classmethod
    def flat_amounts(cls, amounts: Mapping[str, int], vm_memory_overhead: float = 0.0) -> Reserve:
        return cls(flat=tuple(sorted(amounts.items())), vm_memory_overhead=vm_memory_overhead)

    def allocatable(self, vcpus: int, memory_mib: int, max_pods: int, arm64: bool = False) -> dict[str, int]:
        """CPU and memory (milli-units) a node of the type offers its pods, never below zero."""
        if arm64 and (self.flat is None or self.vm_memory_overhead):
            memory_mib -= ARM64_CMA_MIB
        capacity_mib = memory_mib - vm_overhead_mib(memory_mib, self.vm_memory_overhead)
        if self.flat is not None:
            flat = dict(self.flat)
            cpu_kept, memory_kept = flat.get(CPU, 0), flat.get(MEMORY, 0)
        else:
            cpu_kept = kube_reserved_cpu(vcpus)
            memory_kept = (kube_reserved_memory_mib(max_pods) + EVICTION_HARD_MIB) * _MIB
        return {
            CPU: max(0, vcpus * 1000 - cpu_kept),
            MEMORY: max(0, capacity_mib * _MIB - memory_kept),
        }


EKS_RESERVE = Reserve()
# What build_template takes: a Reserve, or a plain mapping of flat amounts (no VM overhead).
ReserveLike = Reserve | Mapping[str, int]


def as_reserve(reserve: ReserveLike) -> Reserve:
    return reserve if isinstance(reserve, Reserve) else Reserve.flat_amounts(reserve)
