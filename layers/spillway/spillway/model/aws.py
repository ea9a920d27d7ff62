"""EC2 Auto Scaling and EC2 objects as the AWS APIs (and the AWS CLI's JSON output) return them.

``describe-auto-scaling-groups`` → :class:`AutoScalingGroup`; ``describe-scaling-activities`` →
:class:`ScalingActivity`; ``describe-instance-types`` → :class:`InstanceTypeInfo`. Field names are the
APIs' own (PascalCase); unknown fields are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import resources as importlib_resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# AWS's identifier and time forms, unanchored (match them whole: ``fullmatch``, or ``^...$`` in a pydantic
# pattern), in ASCII: ``\d`` would take any Unicode digit. Instance ids are ``i-`` and 8 (older) or 17
# hex digits; regions as AWS names them (``us-east-1``, ``us-gov-west-1``, ``us-iso-east-1``); times RFC
# 3339 with their zone (EventBridge's ``time``, what :func:`spillway.model.act.iso` writes).
INSTANCE_ID_FORM = r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})"
# A region of any partition (botocore's endpoints.json, each partition's regionRegex): two letters, then
# ``-gov`` or ``-iso`` and a letter for GovCloud and the isolated ones; ``eusc-`` and a country for the
# AWS European Sovereign Cloud (``eusc-de-east-1``).
REGION_FORM = r"(?:[a-z]{2}(?:-gov|-iso[a-z]?)?|eusc-[a-z]{2})-[a-z]+-[0-9]+"
RFC3339_FORM = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
# Zones are their region and a letter (``us-east-1a``), or for a Local or Wavelength Zone dash-separated
# parts after the region (``us-west-2-lax-1a``, ``us-east-1-wl1-bos-wlz-1``). Subnet and launch template
# ids carry their prefix and 8 or 17 hex digits, as every EC2 resource id ("Resource IDs", EC2 User Guide);
# launch template names are 3 to 128 of ``[a-zA-Z0-9().-/_]`` (CreateLaunchTemplate); a fleet id is
# ``fleet-`` and a UUID.
ZONE_FORM = REGION_FORM + r"(?:[a-z]|(?:-[a-z0-9]+)+)"
SUBNET_ID_FORM = r"subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})"
LAUNCH_TEMPLATE_ID_FORM = r"lt-(?:[0-9a-f]{8}|[0-9a-f]{17})"
LAUNCH_TEMPLATE_NAME_FORM = r"[a-zA-Z0-9().\-/_]{3,128}"
FLEET_ID_FORM = r"fleet-[0-9a-f-]{1,64}"
INSTANCE_TYPE_FORM = r"[a-z0-9][a-z0-9-]*\.[a-z0-9-]+"


class AwsModel(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Tag(AwsModel):
    Key: str
    Value: str = ""
    ResourceId: str | None = None
    ResourceType: str | None = None
    PropagateAtLaunch: bool | None = None


class LaunchTemplateSpec(AwsModel):
    LaunchTemplateId: str | None = None
    LaunchTemplateName: str | None = None
    Version: str | None = None

    def named(self) -> dict[str, str] | None:
        """As EC2 names a template (``LaunchTemplateId`` or ``LaunchTemplateName``, and ``Version``,
        ``$Default`` without one), or None when it names none."""
        if self.LaunchTemplateId:
            return {"LaunchTemplateId": self.LaunchTemplateId, "Version": self.Version or "$Default"}
        if self.LaunchTemplateName:
            return {"LaunchTemplateName": self.LaunchTemplateName, "Version": self.Version or "$Default"}
        return None


def template_key(spec: Mapping[str, str]) -> str:
    """A launch template as a group names it (:meth:`LaunchTemplateSpec.named`), as one string: its id
    (else its name) and the version it asks for (``lt-0abc@$Default``, ``my-nodes@$Latest``), the key
    of :attr:`AutoScalingGroup.ResolvedLaunchTemplates`."""
    return f"{spec.get('LaunchTemplateId') or spec.get('LaunchTemplateName')}@{spec.get('Version')}"


def launched_from(template_id: str | None, version: str | None) -> str:
    """A launch source (what a node is launched from, spillway.model.nodecache): ``<template id>@<version
    number>`` when both are known and the version is a number, else ""."""
    text = (version or "").strip()
    return f"{template_id}@{int(text)}" if template_id and text.isdigit() and int(text) > 0 else ""


class LaunchTemplateInfo(AwsModel):
    """``describe-launch-templates``' ``LaunchTemplates[]``: the version numbers ``$Latest`` and
    ``$Default`` name now."""

    LaunchTemplateId: str
    LaunchTemplateName: str | None = None
    LatestVersionNumber: int = Field(ge=1)
    DefaultVersionNumber: int = Field(ge=1)

    def version_number(self, version: str) -> int | None:
        """The number ``version`` (``$Latest``, ``$Default`` or a number) names; None for anything else."""
        if version == "$Latest":
            return self.LatestVersionNumber
        if version == "$Default":
            return self.DefaultVersionNumber
        return int(version) if version.isdigit() and int(version) > 0 else None


#: the interface types of a launch template's network interfaces that are EFA devices
EFA_INTERFACE_TYPES = frozenset({"efa", "efa-only"})


class LaunchTemplateVersionInfo(AwsModel):
    """``describe-launch-template-versions``' ``LaunchTemplateVersions[]``, what Spillway reads of it."""

    LaunchTemplateId: str
    VersionNumber: int = Field(ge=1)
    LaunchTemplateData: dict[str, Any] = Field(default_factory=dict)

    @property
    def instance_type(self) -> str | None:
        found = self.LaunchTemplateData.get("InstanceType")
        return str(found) if found else None

    @property
    def spot(self) -> bool:
        """Whether it asks for Spot (``InstanceMarketOptions.MarketType: spot``)."""
        return (self.LaunchTemplateData.get("InstanceMarketOptions") or {}).get("MarketType") == "spot"

    @property
    def efa_interfaces(self) -> int:
        """The EFA interfaces it attaches at launch: its ``NetworkInterfaces`` whose ``InterfaceType`` is
        ``efa`` (EFA with ENA) or ``efa-only`` (EC2 API Reference,
        LaunchTemplateInstanceNetworkInterfaceSpecificationRequest); each is one EFA device on the node."""
        interfaces = self.LaunchTemplateData.get("NetworkInterfaces") or []
        return sum(
            1 for i in interfaces if isinstance(i, dict) and i.get("InterfaceType") in EFA_INTERFACE_TYPES
        )


class LaunchTemplateOverride(AwsModel):
    InstanceType: str | None = None
    # attribute-based instance type selection instead of InstanceType (not resolved to types here)
    InstanceRequirements: dict[str, Any] | None = None
    # the launch template for this type (another AMI, an arm64 one, say) instead of the group's
    LaunchTemplateSpecification: LaunchTemplateSpec | None = None
    # how many units of the group's capacity an instance of the type counts for (1 to 999; absent: 1)
    WeightedCapacity: str | None = None


class MixedLaunchTemplate(AwsModel):
    LaunchTemplateSpecification: LaunchTemplateSpec | None = None
    Overrides: list[LaunchTemplateOverride] = Field(default_factory=list)


class Distribution(AwsModel):
    OnDemandBaseCapacity: int | None = None
    OnDemandPercentageAboveBaseCapacity: int | None = None
    SpotAllocationStrategy: str | None = None
    OnDemandAllocationStrategy: str | None = None


class MixedInstances(AwsModel):
    LaunchTemplate: MixedLaunchTemplate | None = None
    InstancesDistribution: Distribution | None = None


class ReusePolicy(AwsModel):
    """``InstanceReusePolicy`` of a warm pool (PutWarmPool, DescribeWarmPool)."""

    # whether the group returns the instances it scales in to the warm pool instead of terminating them
    ReuseOnScaleIn: bool | None = None


class WarmPoolConfig(AwsModel):
    MaxGroupPreparedCapacity: int | None = None
    MinSize: int | None = None
    PoolState: str | None = None  # Stopped | Running | Hibernated
    Status: str | None = None  # PendingDelete while the pool is being deleted
    InstanceReusePolicy: ReusePolicy | None = None

    @property
    def reuses_on_scale_in(self) -> bool:
        """``InstanceReusePolicy.ReuseOnScaleIn``: a scale-in returns instances to the pool (absent: the
        default, they are terminated; PutWarmPool)."""
        return self.InstanceReusePolicy is not None and self.InstanceReusePolicy.ReuseOnScaleIn is True


class WarmPoolInstance(AwsModel):
    """``describe-warm-pool`` ``Instances[]``: an instance kept ready outside the group's capacity."""

    InstanceId: str
    InstanceType: str | None = None
    AvailabilityZone: str | None = None
    LifecycleState: str  # Warmed:Stopped, Warmed:Running, Warmed:Hibernated, Warmed:Pending, ...


class WarmPool(AwsModel):
    """``describe-warm-pool``'s answer for one group."""

    WarmPoolConfiguration: WarmPoolConfig | None = None
    Instances: list[WarmPoolInstance] = Field(default_factory=list)


class ScheduledAction(AwsModel):
    """``describe-scheduled-actions`` ``ScheduledUpdateGroupActions[]``: sets MinSize/MaxSize/desired at
    ``StartTime`` (once) or at every ``Recurrence`` (a 5-field cron) in ``TimeZone`` (IANA; UTC without)
    between ``StartTime`` and ``EndTime``."""

    AutoScalingGroupName: str
    ScheduledActionName: str
    ScheduledActionARN: str | None = None
    StartTime: datetime | None = None
    EndTime: datetime | None = None
    Recurrence: str | None = None
    MinSize: int | None = Field(default=None, ge=0)
    MaxSize: int | None = Field(default=None, ge=0)
    DesiredCapacity: int | None = Field(default=None, ge=0)
    TimeZone: str | None = None

    @property
    def region(self) -> str | None:
        """From ``ScheduledActionARN`` (``arn:aws:autoscaling:<region>:...``), when it names one."""
        parts = (self.ScheduledActionARN or "").split(":")
        return parts[3] if len(parts) > 3 and parts[2] == "autoscaling" and parts[3] else None


class SuspendedProcess(AwsModel):
    """``SuspendedProcesses[]``: a scaling process (``Launch``, ``Terminate``, ``AZRebalance``, ...)
    suspended on the group, and why."""

    ProcessName: str
    SuspensionReason: str | None = None


class AsgInstance(AwsModel):
    InstanceId: str
    InstanceType: str | None = None
    AvailabilityZone: str | None = None
    LifecycleState: str
    HealthStatus: str | None = None
    ProtectedFromScaleIn: bool = False
    # the units of the group's capacity it counts for: its type's weight when it launched, kept after
    # the override is changed or removed (absent: 1)
    WeightedCapacity: str | None = None
    # what it was launched from: the launch template with the version number it was launched with
    # (Auto Scaling API Reference, Instance: LaunchTemplate), or the launch configuration's name
    LaunchTemplate: LaunchTemplateSpec | None = None
    LaunchConfigurationName: str | None = None

    @property
    def launch_source(self) -> str:
        """``lt-0abc@7`` or ``lc:<name>``, as :meth:`AutoScalingGroup.launch_source` says it; "" when not
        known (no id, or a version that is not a number, as files written by hand may say)."""
        spec = self.LaunchTemplate
        if spec is not None:
            return launched_from(spec.LaunchTemplateId, spec.Version)
        return f"lc:{self.LaunchConfigurationName}" if self.LaunchConfigurationName else ""


#: the tags EKS gives the Auto Scaling group of a managed node group (and cluster-autoscaler reads,
#: kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go ``buildNodeFromTemplate``)
TAG_EKS_CLUSTER = "eks:cluster-name"
TAG_EKS_NODEGROUP = "eks:nodegroup-name"


class EksTaint(AwsModel):
    """A taint as the EKS API spells it (EKS API Reference, ``Taint``): ``value`` is optional, ``effect``
    one of ``NO_SCHEDULE``, ``NO_EXECUTE``, ``PREFER_NO_SCHEDULE``."""

    key: str
    value: str | None = None
    effect: str


class EksNodegroup(AwsModel):
    """What Spillway reads of DescribeNodegroup's ``nodegroup`` (EKS API Reference, ``Nodegroup``): the
    Kubernetes labels and taints EKS gives every node of the group, its capacity type, and its tags."""

    nodegroupName: str
    clusterName: str
    # arn:aws:eks:<region>:<account>:nodegroup/<cluster>/<name>/<id>: the region of a node group read
    # from a file (observe knows the region it asked in)
    nodegroupArn: str | None = None
    capacityType: str | None = None  # ON_DEMAND | SPOT | CAPACITY_BLOCK
    # AL2023_x86_64_STANDARD, BOTTLEROCKET_ARM_64, ... or CUSTOM (a launch template's own AMI, whose user
    # data is the user's: EKS then puts no max pods cap in it)
    amiType: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[EksTaint] = Field(default_factory=list)
    # the node group's own resource tags (not its Auto Scaling group's: EKS does not propagate them);
    # of these cluster-autoscaler reads the node-template resources keys only
    # (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go buildNodeFromTemplate)
    tags: dict[str, str] = Field(default_factory=dict)


class AutoScalingGroup(AwsModel):
    AutoScalingGroupName: str
    AutoScalingGroupARN: str
    MinSize: int = Field(ge=0)
    MaxSize: int = Field(ge=0)
    DesiredCapacity: int = Field(ge=0)
    # what MinSize, MaxSize and DesiredCapacity count: units (absent: instances, or weighted units with
    # WeightedCapacity overrides), vcpu or memory-mib
    DesiredCapacityType: str | None = None
    AvailabilityZones: list[str] = Field(default_factory=list)
    Instances: list[AsgInstance] = Field(default_factory=list)
    Tags: list[Tag] = Field(default_factory=list)
    LaunchTemplate: LaunchTemplateSpec | None = None
    LaunchConfigurationName: str | None = None
    MixedInstancesPolicy: MixedInstances | None = None
    VPCZoneIdentifier: str | None = None  # comma-separated subnet ids
    # the scaling processes suspended (DescribeAutoScalingGroups lists them; none: all of them run)
    SuspendedProcesses: list[SuspendedProcess] = Field(default_factory=list)
    CreatedTime: datetime | None = None
    Status: str | None = None  # "Delete in progress" while being deleted
    WarmPoolConfiguration: WarmPoolConfig | None = None
    WarmPoolSize: int | None = None
    # Capacity Rebalancing: the group itself replaces a Spot instance that gets a rebalance recommendation
    # (launches a replacement, then terminates the at-risk instance through its terminate lifecycle
    # hooks, its desired capacity unchanged; EC2 Auto Scaling User Guide, "Use Capacity Rebalancing to
    # handle Amazon EC2 Spot Interruptions")
    CapacityRebalance: bool | None = None
    # whether the instances the group launches are protected from its own scale-in ("Use instance
    # scale-in protection"); each instance's own setting is its ProtectedFromScaleIn
    NewInstancesProtectedFromScaleIn: bool | None = None
    # the order in which the group's own scale-in picks instances, each policy deciding among those the
    # one before left tied ("Configure termination policies"): predefined names (Default, OldestInstance,
    # NewestInstance, OldestLaunchTemplate, OldestLaunchConfiguration, ClosestToNextInstanceHour,
    # AllocationStrategy) or, first, a Lambda function's ARN (a custom policy); none listed: Default
    TerminationPolicies: list[str] = Field(default_factory=list)
    # Spillway's, not DescribeAutoScalingGroups': the instance type its launch template version (or
    # launch configuration) names, read by the adapter for a group without overrides: what every instance
    # it launches now gets, whatever type its running instances have (spillway.model.nodegroup
    # resolve_instance_type); None when not read (input from describe-auto-scaling-groups alone)
    LaunchInstanceType: str | None = None
    # Spillway's too: "spot" when the launch template version asks for Spot
    # (InstanceMarketOptions.MarketType) or the launch configuration has a SpotPrice, "on-demand" when
    # it does not, None when not read (a mixed instances policy, whose template may not ask for Spot,
    # or input from describe-auto-scaling-groups alone)
    LaunchMarketType: Literal["spot", "on-demand"] | None = None
    # Spillway's too: the EFA interfaces its launch template version attaches (NetworkInterfaces of
    # InterfaceType efa or efa-only), read by the adapter with LaunchInstanceType; None when not read
    LaunchEfaInterfaces: int | None = None
    # Spillway's too: the launch template (or version) or launch configuration the group names does not
    # exist, as EC2 answered; the group's tags then decide its capacity type, and its problems say why
    LaunchSettingsProblem: str | None = None
    # Spillway's too: each launch template the group names (its own and its overrides', by
    # :func:`template_key`) with the version ``$Latest`` or ``$Default`` stands for now, as
    # :func:`launched_from` says it (``lt-0abc@7``), as the adapter resolved it (DescribeLaunchTemplates);
    # empty when not resolved (input from describe-auto-scaling-groups alone, a template EC2 says is gone)
    ResolvedLaunchTemplates: dict[str, str] = Field(default_factory=dict)
    # Spillway's too: the EKS managed node group the group belongs to (its ``eks:`` tags), as
    # DescribeNodegroup answered, read by the adapter for the group's template; None when not read
    ManagedNodegroup: EksNodegroup | None = None
    # Spillway's too: why DescribeNodegroup did not answer (refused, or no such node group): the group's
    # template is then its tags' alone, and its problems say so
    ManagedNodegroupProblem: str | None = None
    # Spillway's too: the group's terminate lifecycle hooks that are Spillway's (LIFECYCLE_HOOK_NAMES), as
    # DescribeLifecycleHooks answered, read by the adapter for a group AZRebalance may take a node of
    # (spillway.model.nodegroup.rebalance_problem); None when not read (input from
    # describe-auto-scaling-groups alone, another group, a read that failed)
    DrainHooks: list[str] | None = None

    @property
    def eks_nodegroup(self) -> tuple[str, str] | None:
        """(cluster, node group) its ``eks:cluster-name`` and ``eks:nodegroup-name`` tags name, when it
        carries both: the group of an EKS managed node group."""
        tags = self.tag_map()
        cluster, nodegroup = tags.get(TAG_EKS_CLUSTER), tags.get(TAG_EKS_NODEGROUP)
        return (cluster, nodegroup) if cluster and nodegroup else None

    @property
    def launch_template(self) -> dict[str, str] | None:
        """Its launch template (plain or in its MixedInstancesPolicy) as EC2 names one
        (``LaunchTemplateId`` or ``LaunchTemplateName``, and ``Version``, ``$Default`` without one), or
        None (a launch configuration)."""
        spec = self.LaunchTemplate
        if spec is None and self.MixedInstancesPolicy and self.MixedInstancesPolicy.LaunchTemplate:
            spec = self.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
        return spec.named() if spec is not None else None

    def launch_template_for(self, instance_type: str | None) -> dict[str, str] | None:
        """The launch template an instance of ``instance_type`` launches from: its override's own
        ``LaunchTemplateSpecification`` when it has one, else the group's (:attr:`launch_template`)."""
        mixed = self.MixedInstancesPolicy
        for override in mixed.LaunchTemplate.Overrides if mixed and mixed.LaunchTemplate else ():
            own = override.LaunchTemplateSpecification
            if instance_type and override.InstanceType == instance_type and own is not None and own.named():
                return own.named()
        return self.launch_template

    def named_templates(self) -> list[dict[str, str]]:
        """Every launch template the group names, as EC2 names one: its own, then its overrides'."""
        mixed = self.MixedInstancesPolicy
        overrides = mixed.LaunchTemplate.Overrides if mixed and mixed.LaunchTemplate else []
        specs = [self.launch_template] + [o.LaunchTemplateSpecification.named() for o in overrides
                                          if o.LaunchTemplateSpecification is not None]  # fmt: skip
        return [spec for spec in specs if spec is not None]

    def launch_source(self, instance_type: str | None) -> str:
        """What an instance of ``instance_type`` launches from now: ``<template id>@<version number>``
        (:meth:`launch_template_for`, its ``$Latest`` or ``$Default`` as resolved, else a version it
        names by number), ``lc:<name>`` for a launch configuration; "" when not known."""
        spec = self.launch_template_for(instance_type)
        if spec is None:
            return f"lc:{self.LaunchConfigurationName}" if self.LaunchConfigurationName else ""
        resolved = self.ResolvedLaunchTemplates.get(template_key(spec))
        return resolved or launched_from(spec.get("LaunchTemplateId"), spec.get("Version"))

    @property
    def region(self) -> str:
        """``arn:aws:autoscaling:<region>:<account>:autoScalingGroup:...`` → region."""
        parts = self.AutoScalingGroupARN.split(":")
        if len(parts) < 6 or parts[2] != "autoscaling" or not parts[3]:
            arn = self.AutoScalingGroupARN
            raise ValueError(f"AutoScalingGroupARN: not an Auto Scaling group ARN: {arn}")
        return parts[3]

    def tag_map(self) -> dict[str, str]:
        return {t.Key: t.Value for t in self.Tags}

    def suspended(self, process: str) -> bool:
        """Whether the scaling ``process`` (``AZRebalance``, ...) is suspended on the group."""
        return any(p.ProcessName == process for p in self.SuspendedProcesses)

    def instance_weight(self, instance_id: str) -> int:
        """The units of DesiredCapacity the instance counts for, which terminating it with the decrement
        takes off: its ``WeightedCapacity`` (1 without one, or for an instance not in the group)."""
        found = next((i for i in self.Instances if i.InstanceId == instance_id), None)
        text = (found.WeightedCapacity or "1").strip() if found is not None else "1"
        return int(text) if text.isdigit() and int(text) > 0 else 1


#: (cluster, node group): what DescribeNodegroup is asked about, named by a group's ``eks:`` tags
NodegroupKey = tuple[str, str]
#: what was read of a node group: its description, or why there is none (the group's problem)
NodegroupRead = EksNodegroup | str

#: the end of the problem of a managed group whose node group could not be read
NODEGROUP_UNREAD_EFFECT = (
    "the template has only the labels and taints of the group's tags; a pod selecting the node group's "
    "labels does not scale it from zero"
)


def wanted_nodegroups(groups: Iterable[AutoScalingGroup]) -> list[NodegroupKey]:
    """The node groups (cluster, name) the live groups of one region belong to, each once, sorted: what
    DescribeNodegroup is asked about (a group being deleted, ``Status`` set, is not read)."""
    return sorted({g.eks_nodegroup for g in groups if not g.Status and g.eks_nodegroup is not None})


def with_managed_nodegroups(
    groups: Sequence[AutoScalingGroup], read: Mapping[NodegroupKey, NodegroupRead]
) -> list[AutoScalingGroup]:
    """``groups`` (of one region) in their order, each live group of a node group in ``read`` with what
    was read of it: :attr:`AutoScalingGroup.ManagedNodegroup`, or, when it could not be read,
    :attr:`AutoScalingGroup.ManagedNodegroupProblem`. The one way the observe Lambda (from
    DescribeNodegroup) and ``spillway plan`` (from ``aws eks describe-nodegroup`` output) give a group its
    node group; the template merges it (spillway.model.nodegroup ``build_template``)."""
    out: list[AutoScalingGroup] = []
    for group in groups:
        key = group.eks_nodegroup
        got = read.get(key) if key is not None and not group.Status else None
        if isinstance(got, EksNodegroup):
            group = group.model_copy(update={"ManagedNodegroup": got})
        elif isinstance(got, str):
            group = group.model_copy(update={"ManagedNodegroupProblem": got})
        out.append(group)
    return out


class CreateFleetInstance(AwsModel):
    InstanceIds: list[str] = Field(default_factory=list)
    InstanceType: str | None = None
    Lifecycle: str | None = None


class FleetOverride(AwsModel):
    """What an instant fleet's error names of the override it could not launch
    (FleetLaunchTemplateOverrides): the instance type, and the subnet or zone it was asked in."""

    InstanceType: str | None = None
    SubnetId: str | None = None
    AvailabilityZone: str | None = None


class FleetLaunchTemplateAndOverrides(AwsModel):
    Overrides: FleetOverride | None = None


class CreateFleetError(AwsModel):
    """One override EC2 could not launch, and why (``ErrorCode``); ``Lifecycle``: ``spot``,
    ``on-demand``, or reserved capacity (``capacity-block``, ...)."""

    ErrorCode: str = ""
    ErrorMessage: str = ""
    Lifecycle: str | None = None
    LaunchTemplateAndOverrides: FleetLaunchTemplateAndOverrides | None = None

    @property
    def override(self) -> FleetOverride | None:
        return self.LaunchTemplateAndOverrides.Overrides if self.LaunchTemplateAndOverrides else None


class CreateFleetResult(AwsModel):
    """``ec2 create-fleet --type instant``: what launched (``Instances``) and what did not (``Errors``)."""

    FleetId: str | None = None
    Instances: list[CreateFleetInstance] = Field(default_factory=list)
    Errors: list[CreateFleetError] = Field(default_factory=list)

    @property
    def instance_ids(self) -> list[str]:
        return sorted({i for launched in self.Instances for i in launched.InstanceIds})


@dataclass(frozen=True, slots=True)
class FleetRequest:
    """One EC2 Fleet of type ``instant``: ``count`` instances of ``capacity_type`` (``on-demand`` or
    ``spot``), all or none (``MinTargetCapacity``), one instance type (``SingleInstanceType``) in one zone
    (``SingleAvailabilityZone``), chosen by EC2 among one override per subnet (else per zone).
    ``client_token`` makes a repeated call the same call. ``spot_allocation_strategy``: the group's
    (``price-capacity-optimized``, ...; EC2 Fleet takes the same names), EC2's default without one."""

    launch_template: Mapping[str, str]  # LaunchTemplateId or LaunchTemplateName, and Version
    count: int
    client_token: str
    instance_type: str | None = None
    subnets: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)  # put on the instances and their volumes
    capacity_type: str = "on-demand"
    spot_allocation_strategy: str | None = None

    def to_api(self) -> dict[str, Any]:
        """The keyword arguments of ``ec2.create_fleet``."""
        base = {"InstanceType": self.instance_type} if self.instance_type else {}
        if self.subnets:
            overrides = [{**base, "SubnetId": s} for s in self.subnets]
        elif self.zones:
            overrides = [{**base, "AvailabilityZone": z} for z in self.zones]
        else:
            overrides = [base] if base else []
        config: dict[str, Any] = {"LaunchTemplateSpecification": dict(self.launch_template)}
        if overrides:
            config["Overrides"] = overrides
        tags = [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())]
        return {
            "Type": "instant",
            "ClientToken": self.client_token,
            "LaunchTemplateConfigs": [config],
            **self._capacity(),
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tags},
                {"ResourceType": "volume", "Tags": tags},
            ]
            if tags
            else [],
        }

    def _capacity(self) -> dict[str, Any]:
        """The target capacity and its options: all ``count`` of one capacity type or none (a target for
        one type excludes one for the other; MinTargetCapacity is supported for instant fleets with
        SingleInstanceType or SingleAvailabilityZone, for Spot as for On-Demand)."""
        whole = {"MinTargetCapacity": self.count, "SingleInstanceType": True, "SingleAvailabilityZone": True}
        if self.capacity_type == "spot":
            strategy = (
                {"AllocationStrategy": self.spot_allocation_strategy} if self.spot_allocation_strategy else {}
            )
            return {
                "TargetCapacitySpecification": {
                    "TotalTargetCapacity": self.count,
                    "SpotTargetCapacity": self.count,
                    "DefaultTargetCapacityType": "spot",
                },
                "SpotOptions": {**whole, **strategy},
            }
        return {
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": self.count,
                "OnDemandTargetCapacity": self.count,
                "DefaultTargetCapacityType": "on-demand",
            },
            "OnDemandOptions": whole,
        }


class ScalingActivity(AwsModel):
    ActivityId: str
    AutoScalingGroupName: str
    AutoScalingGroupARN: str | None = None
    Description: str = ""
    Cause: str = ""
    StartTime: datetime
    EndTime: datetime | None = None
    StatusCode: str
    StatusMessage: str | None = None
    Progress: int | None = None

    @property
    def is_launch(self) -> bool:
        return self.Description.startswith("Launching")


class VCpus(AwsModel):
    DefaultVCpus: int


class Memory(AwsModel):
    SizeInMiB: int


class GpuDevice(AwsModel):
    Name: str = ""
    Manufacturer: str = ""
    Count: int = 0
    MemoryInfo: Memory | None = None


class Gpus(AwsModel):
    Gpus: list[GpuDevice] = Field(default_factory=list)
    TotalGpuMemoryInMiB: int | None = None


class NeuronCores(AwsModel):
    Count: int = 0  # per device


class NeuronDevice(AwsModel):
    Name: str = ""
    Count: int = 0
    CoreInfo: NeuronCores | None = None


class Neurons(AwsModel):
    NeuronDevices: list[NeuronDevice] = Field(default_factory=list)


class Processor(AwsModel):
    SupportedArchitectures: list[str] = Field(default_factory=list)


class NetworkCard(AwsModel):
    NetworkCardIndex: int = 0
    MaximumNetworkInterfaces: int | None = None


class Efa(AwsModel):
    MaximumEfaInterfaces: int | None = None


class Network(AwsModel):
    MaximumNetworkInterfaces: int | None = None  # over every network card
    EfaInfo: Efa | None = None  # only for a type that supports EFA
    Ipv4AddressesPerInterface: int | None = None
    NetworkCards: list[NetworkCard] = Field(default_factory=list)
    DefaultNetworkCardIndex: int | None = None

    @property
    def pod_interfaces(self) -> int | None:
        """The interfaces the VPC CNI gives pods: those of the default network card (a type with several
        cards, p4d's four, has most of its interfaces on the others, for EFA), else all."""
        default = self.DefaultNetworkCardIndex or 0
        card = next((c for c in self.NetworkCards if c.NetworkCardIndex == default), None)
        if card is not None and card.MaximumNetworkInterfaces:
            return card.MaximumNetworkInterfaces
        return self.MaximumNetworkInterfaces


class InstanceTypeInfo(AwsModel):
    InstanceType: str
    VCpuInfo: VCpus
    MemoryInfo: Memory
    GpuInfo: Gpus | None = None
    NeuronInfo: Neurons | None = None
    ProcessorInfo: Processor = Field(default_factory=Processor)
    NetworkInfo: Network | None = None

    @property
    def nvidia_gpus(self) -> int:
        return self._gpus("NVIDIA")

    @property
    def amd_gpus(self) -> int:
        return self._gpus("AMD")

    def _gpus(self, manufacturer: str) -> int:
        if self.GpuInfo is None:
            return 0
        return sum(g.Count for g in self.GpuInfo.Gpus if g.Manufacturer.upper() == manufacturer)

    @property
    def neuron_devices(self) -> int:
        return sum(d.Count for d in self.NeuronInfo.NeuronDevices) if self.NeuronInfo else 0

    @property
    def neuron_cores(self) -> int:
        """Every Neuron device's cores (DescribeInstanceTypes' ``CoreInfo.Count`` is per device)."""
        devices = self.NeuronInfo.NeuronDevices if self.NeuronInfo else []
        return sum(d.Count * (d.CoreInfo.Count if d.CoreInfo else 0) for d in devices)

    @property
    def efa_interfaces(self) -> int:
        """The EFA interfaces a node of the type may have (``NetworkInfo.EfaInfo.MaximumEfaInterfaces``:
        one per network card); 0 for a type without EFA."""
        efa = self.NetworkInfo.EfaInfo if self.NetworkInfo is not None else None
        return (efa.MaximumEfaInterfaces or 0) if efa is not None else 0

    @property
    def architecture(self) -> str:
        """The Kubernetes ``kubernetes.io/arch`` value."""
        archs = self.ProcessorInfo.SupportedArchitectures
        return "arm64" if archs and archs[0] == "arm64" else "amd64"

    @property
    def max_pods(self) -> int | None:
        """EKS's VPC CNI limit (its eni-max-pods.txt): ENIs of the default network card * (IPv4
        addresses per ENI - 1) + 2."""
        net = self.NetworkInfo
        enis = net.pod_interfaces if net is not None else None
        if net is None or not enis or not net.Ipv4AddressesPerInterface:
            return None
        return enis * (net.Ipv4AddressesPerInterface - 1) + 2


def parse_asgs(doc: Any) -> list[AutoScalingGroup]:
    return [AutoScalingGroup.model_validate(g) for g in _items(doc, "AutoScalingGroups")]


def parse_activities(doc: Any) -> list[ScalingActivity]:
    return [ScalingActivity.model_validate(a) for a in _items(doc, "Activities")]


def parse_scheduled_actions(doc: Any) -> list[ScheduledAction]:
    """``aws autoscaling describe-scheduled-actions`` output."""
    return [ScheduledAction.model_validate(a) for a in _items(doc, "ScheduledUpdateGroupActions")]


def parse_instance_types(doc: Any) -> dict[str, InstanceTypeInfo]:
    infos = [InstanceTypeInfo.model_validate(t) for t in _items(doc, "InstanceTypes")]
    return {i.InstanceType: i for i in infos}


def availability_zone_ids(zones: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Zone name -> zone id (``us-east-1a`` -> ``use1-az4``) of a DescribeAvailabilityZones answer's
    ``AvailabilityZones``, in name order; a zone without either is left out. One reading for observe's
    call (``AwsAdapter.zone_ids_in``) and ``spillway plan --zones`` (its output, one region at a time)."""
    return dict(
        sorted((str(z["ZoneName"]), str(z["ZoneId"])) for z in zones if z.get("ZoneName") and z.get("ZoneId"))
    )


def _items(doc: Any, key: str) -> list[Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise ValueError(f"{key}: missing or not a list")
    return list(doc[key])


@cache
def bundled_instance_types() -> dict[str, InstanceTypeInfo]:
    """The catalogue shipped with Spillway (a ``describe-instance-types`` snapshot)."""
    text = importlib_resources.files("spillway").joinpath("data/instance_types.json").read_text()
    return parse_instance_types(json.loads(text))
