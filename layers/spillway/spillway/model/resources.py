"""Resource vectors: ``{resource name: milli-units}``, plain dicts for speed.

Missing keys are zero. These helpers are the only arithmetic the planner does on resources.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from spillway.model.quantity import format_milli, to_milli

Resources = dict[str, int]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL = "ephemeral-storage"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"  # what AMD's device plugin registers for each GPU
NEURON = "aws.amazon.com/neuron"  # whole Neuron devices
NEURON_CORE = "aws.amazon.com/neuroncore"  # their cores: the Neuron device plugin registers both
EFA = (
    "vpc.amazonaws.com/efa"  # the EFA device plugin's: one for each EFA interface the node was launched with
)

# A pod requesting a resource the node does not report cannot run there, except ephemeral storage:
# every kubelet reports it, but an ASG's template node only knows it when a tag declares it.
UNCHECKED_WHEN_UNKNOWN = frozenset({EPHEMERAL})

# How many volumes of a CSI driver a node may have attached, as kube-scheduler's NodeVolumeLimits
# names the limit (pkg/volume/util attach_limit.go, GetCSIAttachLimitKey): the CSINode's
# spec.drivers[].allocatable.count on a node, the number of the driver's unique volumes in a pod's
# requests (spillway.model.cluster.VolumeMatcher). A node with no limit for a driver (no CSINode entry,
# or one without a count) takes any number, so this too is unchecked where a node does not report it.
ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
_RESOURCE_NAME_LIMIT = 63


def attach_limit_key(driver: str) -> str:
    """The resource name of ``driver``'s attach limit: a long driver name is cut to 23 characters
    followed by 16 hex digits of its SHA-1, as kube-scheduler keys it."""
    if len(ATTACH_LIMIT_PREFIX) + len(driver) < _RESOURCE_NAME_LIMIT:
        return ATTACH_LIMIT_PREFIX + driver
    digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
    return ATTACH_LIMIT_PREFIX + driver[:23] + digest


def is_attach_limit(name: str) -> bool:
    return name.startswith(ATTACH_LIMIT_PREFIX)


def unchecked_when_unknown(name: str) -> bool:
    """Whether a node that does not report ``name`` takes any amount of it (UNCHECKED_WHEN_UNKNOWN,
    and CSI attach limits)."""
    return name in UNCHECKED_WHEN_UNKNOWN or name.startswith(ATTACH_LIMIT_PREFIX)


def parse_resource_list(raw: Mapping[str, str | int | float] | None) -> Resources:
    """A Kubernetes ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) as milli-units."""
    if not raw:
        return {}
    return {name: to_milli(value) for name, value in raw.items()}


def with_capacity(capacity: Mapping[str, int], allocatable: Resources) -> Resources:
    """A node's capacity (``status.capacity``): what it reports, and its allocatable for a resource it
    does not report (all of them, for a node that reports no capacity)."""
    if not capacity or capacity is allocatable:
        return allocatable
    if isinstance(capacity, dict) and allocatable.keys() <= capacity.keys():
        return capacity  # reports every resource: kept as it is, not copied
    return {**allocatable, **capacity}


def capacity_delta(capacity: Mapping[str, int], allocatable: Mapping[str, int]) -> Resources:
    """The part of ``capacity`` that differs from ``allocatable``: what :func:`with_capacity` needs, with
    the allocatable, to give the capacity back (its stored form)."""
    return {name: value for name, value in capacity.items() if allocatable.get(name) != value}


def add_into(total: Resources, extra: Mapping[str, int], times: int = 1) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value * times


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) - value
    return out


def add_room(room: Resources, extra: Mapping[str, int], times: int = 1) -> None:
    """:func:`add_into` for a node's room: a resource checked only where reported
    (:func:`unchecked_when_unknown`) that ``room`` does not report stays unreported, so pods taking
    some of it, or giving it back, do not turn a node with no limit into one with a limit."""
    for name, value in extra.items():
        if name in room or not unchecked_when_unknown(name):
            room[name] = room.get(name, 0) + value * times


def room_less(allocatable: Mapping[str, int], used: Mapping[str, int]) -> Resources:
    """:func:`subtract` for a node's room: ``allocatable`` less ``used``, but for the resources checked
    only where reported that ``allocatable`` does not report (:func:`add_room`)."""
    out = dict(allocatable)
    add_room(out, used, -1)
    return out


def fit_count(request: Mapping[str, int], free: Mapping[str, int], limit: int) -> int:
    """How many copies of ``request`` fit in ``free``, at most ``limit``."""
    count = limit
    for name, want in request.items():
        if want <= 0:
            continue
        have = free.get(name)
        if have is None:
            if unchecked_when_unknown(name):
                continue
            return 0
        room = have // want
        if room < count:
            count = room
            if count <= 0:
                return 0
    return count


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return fit_count(request, free, 1) == 1


def dominant_share(request: Mapping[str, int], capacity: Mapping[str, int]) -> tuple[str, float]:
    """The resource ``request`` uses the largest fraction of ``capacity`` for, and that fraction."""
    best_name, best = CPU, 0.0
    for name in sorted(request):
        if name.startswith(ATTACH_LIMIT_PREFIX):  # a count of volumes, not room a node is paid for
            continue
        want = request[name]
        have = capacity.get(name, 0)
        if want <= 0 or have <= 0:
            continue
        share = want / have
        if share > best:
            best_name, best = name, share
    return best_name, best


def freeze(resources: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k, v) for k, v in resources.items() if v))


def describe(resources: Mapping[str, int], names: Iterable[str] | None = None) -> str:
    """``cpu=4,memory=16Gi,nvidia.com/gpu=1`` for reasons."""
    keys = sorted(resources) if names is None else list(names)
    return ",".join(f"{k}={format_milli(k, resources[k])}" for k in keys if resources.get(k))
