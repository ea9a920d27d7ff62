"""Remove an instance no Node joined for (the scale-down's ``remove_unregistered`` step).

A plan lists the instances of managed groups that no Node has named for ``max_node_provision_minutes``
(:mod:`spillway.planner.joins`); the scale-down state machine gives each to this step, on the drain
function, which already reaches the cluster and may terminate instances of the cluster's groups. The
step checks the world again before it terminates anything, because the plan's snapshot is older:

* the instance is no longer in its group, or is terminating: ``gone``, nothing done;
* a Node runs on it by now (EKS names a Node after the instance's private DNS name; one whose
  ``spec.providerID`` names another instance does not count): ``joined``, nothing done;
* the group is a group of another cluster or no managed group: refused (:class:`InvalidDrainRequest`);
* the group's Terminate process is suspended (since the plan: a plan lists no InService instance of such a group)
  and the instance is InService: Auto Scaling would not terminate it (the rule a drain and a give-back
  follow too: :func:`~spillway.act.instances.terminate_held`), so it is not asked: ``held``, nothing
  done, the note naming the process to resume; one still Pending is terminated as below;
* else TerminateInstanceInAutoScalingGroup, decrementing the desired capacity (``removed``), unless
  the plan said not to or AWS refuses the decrement, the group's live desired capacity being at its
  MinSize (asked, not judged from the step's group read, which may be older:
  :func:`~spillway.act.instances.terminate_in_group`): then without, and the group launches a
  replacement (``replaced``).

Idempotent: a retry after the terminate finds the instance terminating (``gone``). A removal that fails
is retried by the next plan, which still finds the instance overdue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spillway.act.instances import nodes_on, terminate_held, terminate_in_group, where_gone
from spillway.errors import InstanceNotFound, InvalidDrainRequest
from spillway.model.drain import Placement
from spillway.model.nodegroup import TERMINATE, is_managed
from spillway.ports import Cloud, Cluster


class InstanceRequest(BaseModel):
    """What every plan's request about one instance names: its cluster and region."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str = Field(min_length=1)
    plan_id: str | None = None
    instance_id: str = Field(pattern=r"^i-[0-9a-f]{8,17}$")
    region: str = Field(min_length=1, max_length=32)
    reason: str = Field(default="", max_length=1024)


R = TypeVar("R", bound=InstanceRequest)
Removal = Literal["removed", "replaced", "joined", "gone", "held"]


class RemovalRequest(InstanceRequest):
    """One ``unregistered`` entry of a plan, with the cluster it is of."""

    group: str = Field(min_length=1, max_length=255)
    decrement: bool = True


def parse_instance_request(model: type[R], raw: Any, cluster: str, regions: tuple[str, ...]) -> R:
    """A plan's request about one instance (an unregistered one, a gang orphan): ``model`` validated,
    of this function's cluster and of one of its regions, or :class:`InvalidDrainRequest` naming the
    first bad field, before anything is read or touched."""
    if not isinstance(raw, Mapping):
        raise InvalidDrainRequest("the step's input has no request object", field="request")
    try:
        request = model.model_validate(dict(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "request"
        raise InvalidDrainRequest(f"{where}: {err['msg']}", field=where) from None
    if request.cluster != cluster:
        raise InvalidDrainRequest(
            f"the instance is of cluster {request.cluster!r}; this function serves {cluster!r}",
            field="cluster",
        )
    if request.region not in regions:
        raise InvalidDrainRequest(
            f"region {request.region!r} is not one of this deployment's ({', '.join(regions)})",
            field="region",
        )
    return request


def remove_unregistered(
    kube: Cluster, cloud: Cloud, cluster: str, regions: tuple[str, ...], raw: Any
) -> dict[str, Any]:
    """Check, then terminate (see the module docstring). The result is one line of the scale-down's
    summary: ``{node: None, instance_id, group, region, outcome, note}``."""
    request = parse_instance_request(RemovalRequest, raw, cluster, regions)
    outcome, note = _remove(kube, cloud, cluster, request)
    return {
        "node": None,
        "instance_id": request.instance_id,
        "group": request.group,
        "region": request.region,
        "outcome": outcome,
        "note": note,
    }


def _remove(kube: Cluster, cloud: Cloud, cluster: str, request: RemovalRequest) -> tuple[Removal, str]:
    iid, region, group = request.instance_id, request.region, request.group
    placement = cloud.placement(region, iid)
    gone = _where(placement, request)
    if gone is not None:
        return "gone", gone
    node = _joined(kube, cloud, region, iid)
    if node is not None:
        return "joined", f"Node {node} runs on {iid} now: left alone"
    asg = cloud.describe_group(region, group)
    if not is_managed(asg, cluster):
        raise InvalidDrainRequest(
            f"Auto Scaling group {group} ({region}) is not a managed group of cluster {cluster!r}",
            field="group",
        )
    if placement is not None and terminate_held(asg, placement.lifecycle_state):
        return "held", (
            f"{iid} is {placement.lifecycle_state} in {group}, whose {TERMINATE} process is suspended: Auto "
            f"Scaling terminates none of its InService instances until it is resumed (aws autoscaling "
            f"resume-processes --auto-scaling-group-name {group} --scaling-processes {TERMINATE}); left "
            "running, not asked"
        )
    try:  # with the decrement unless the plan said not to; without it where AWS refuses it (MinSize)
        activity, decremented = terminate_in_group(cloud, region, iid, decrement=request.decrement)
    except InstanceNotFound:
        gone = _gone(cloud, request)
        if gone is None:
            raise
        return "gone", gone
    if decremented:
        return "removed", f"terminated {iid} ({activity.StatusCode}): {request.reason}"[:1024]
    why = "AWS refused the decrement" if request.decrement else "the plan found the group at it"
    return (
        "replaced",
        f"terminated {iid} ({activity.StatusCode}) without decrementing {group} (MinSize {asg.MinSize} "
        f"when read; {why}): the group launches a replacement",
    )


def _gone(cloud: Cloud, request: RemovalRequest) -> str | None:
    return _where(cloud.placement(request.region, request.instance_id), request)


def _where(placement: Placement | None, request: RemovalRequest) -> str | None:
    where = where_gone(placement, request.instance_id, request.group, request.region)
    return None if where is None else f"{request.instance_id}: {where}"


def _joined(kube: Cluster, cloud: Cloud, region: str, iid: str) -> str | None:
    """The name of the Node that runs on the instance now, if one does (:func:`nodes_on`: one whose
    providerID names no instance at all is taken as this one's, since terminating a working node is the
    worse mistake)."""
    node = nodes_on(kube, cloud, region, [iid]).get(iid)
    return None if node is None else node.metadata.name
