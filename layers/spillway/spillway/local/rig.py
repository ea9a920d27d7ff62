"""The one rig: the whole embedded stack, stood up the same way for ``spillway demo``, the e2e tests and
the benchmarks.

:class:`Rig` (a context manager) starts the Kubernetes API emulator, puts ``template.yaml`` on moto
(:class:`~spillway.local.stack.LocalStack`: the tables, the real handlers answering the Lambda tasks, the
real state machines executed by moto), makes moto's Auto Scaling AWS-like
(:class:`~spillway.local.cloud.CloudSim`) and plays the kubelets
(:class:`~spillway.local.cloud.NodeRegistrar`). On top it does what every user of the stack does: create
the cluster's Auto Scaling groups, observe, read the snapshots table's stream into the PlanFunction the
way Lambda's event source mapping does, and wait for executions. On exit it lets running executions end,
stops everything and puts the process environment back.

:func:`create_group` is the one place an Auto Scaling group is created in moto (launch template, tags the
cluster-autoscaler way, instance type, region), used by the rig and by the tests that need moto alone.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.local.cloud import CloudSim, NodeRegistrar
from spillway.local.kubeapi import KubeApiServer
from spillway.local.stack import LocalStack
from spillway.model.state import BACKOFFS_PARTITION

CLUSTER = "ml"
HOME = "us-east-1"
WEST = "us-west-2"
REGIONS = (HOME, WEST)
AMI = "ami-12c6146b"  # one of moto's default images
ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
GPU_TAINT_TAG = "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# A mixed instances policy's distribution that launches only Spot: no on-demand base, none above it.
ALL_SPOT = {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0}


def create_group(
    name: str,
    *,
    region: str = HOME,
    instance_type: str = "m5.large",
    desired: int = 0,
    min_size: int = 0,
    max_size: int = 8,
    cluster: str | None = CLUSTER,
    enabled: bool = True,
    gpu: bool = False,
    tags: Mapping[str, str] | None = None,
    mixed: bool = True,
    zone: str = "a",
    spot: bool = False,
    capacity_rebalance: bool = False,
) -> dict[str, Any]:
    """An Auto Scaling group in moto with a launch template ``lt-<name>``, tagged for ``cluster`` the
    cluster-autoscaler way (``enabled`` and ``<cluster>: owned``; ``gpu`` adds the nvidia.com/gpu taint
    tag; ``tags`` more). ``mixed`` names the instance type in a MixedInstancesPolicy override, so an empty
    group still has a template node; otherwise the group has the plain LaunchTemplate. It launches in the
    region's availability zone ``zone`` (a letter; several, ``"ab"``, for a group over several zones).
    ``spot`` makes it launch only Spot, as AWS is told to: an InstancesDistribution with no on-demand
    (mixed), else the launch template's ``InstanceMarketOptions`` (moto launches plain instances either
    way). ``capacity_rebalance`` turns on Capacity Rebalancing (``CapacityRebalance``, which moto stores
    and describes but never acts on: it launches no replacement on a rebalance recommendation). Returns
    the group as DescribeAutoScalingGroups prints it."""
    import boto3

    client: Any = boto3.client  # typed per service literal; these are plain dicts
    data: dict[str, Any] = {"ImageId": AMI, "InstanceType": instance_type}
    if spot and not mixed:  # AWS refuses a template asking for Spot in a mixed instances policy
        data["InstanceMarketOptions"] = {"MarketType": "spot"}
    client("ec2", region_name=region).create_launch_template(
        LaunchTemplateName=f"lt-{name}", LaunchTemplateData=data
    )
    all_tags = dict(tags or {})
    if enabled:
        all_tags[ENABLED_TAG] = "true"
    if cluster:
        all_tags[f"k8s.io/cluster-autoscaler/{cluster}"] = "owned"
    if gpu:
        all_tags[GPU_TAINT_TAG] = "present:NoSchedule"
    template = {"LaunchTemplateName": f"lt-{name}", "Version": "$Latest"}
    placement: dict[str, Any] = (
        {
            "MixedInstancesPolicy": {
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": template,
                    "Overrides": [{"InstanceType": instance_type}],
                },
                **({"InstancesDistribution": ALL_SPOT} if spot else {}),
            }
        }
        if mixed
        else {"LaunchTemplate": template}
    )
    autoscaling = client("autoscaling", region_name=region)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=desired,
        AvailabilityZones=[f"{region}{letter}" for letter in zone],
        Tags=[
            {
                "Key": k,
                "Value": v,
                "PropagateAtLaunch": True,
                "ResourceId": name,
                "ResourceType": "auto-scaling-group",
            }
            for k, v in all_tags.items()
        ],
        **({"CapacityRebalance": True} if capacity_rebalance else {}),
        **placement,
    )
    return describe_group(name, region)


def describe_group(name: str, region: str = HOME) -> dict[str, Any]:
    import boto3

    autoscaling: Any = boto3.client("autoscaling", region_name=region)
    found: dict[str, Any] = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])[
        "AutoScalingGroups"
    ][0]
    return found


class SnapshotStream:
    """The snapshots table's stream, read from moto's DynamoDB Streams the way Lambda's event source
    mapping reads it: from the start (TRIM_HORIZON), each :meth:`read` returning the records new since
    the last, binary attributes base64-encoded, ``eventSourceARN`` set."""

    def __init__(self, table: str, region: str = HOME) -> None:
        import boto3

        self.arn = boto3.client("dynamodb", region_name=region).describe_table(TableName=table)["Table"][
            "LatestStreamArn"
        ]
        # botocore addresses <account>.streams-ddb.<region>; moto answers the classic endpoint.
        self.client = boto3.client(
            "dynamodbstreams",
            region_name=region,
            endpoint_url=f"https://streams.dynamodb.{region}.amazonaws.com",
        )
        self.iterators: dict[str, str | None] = {}

    def read(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for shard in self.client.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            if shard_id not in self.iterators:
                self.iterators[shard_id] = self.client.get_shard_iterator(
                    StreamArn=self.arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self.iterators[shard_id]
            if iterator is None:
                continue
            page = self.client.get_records(ShardIterator=iterator, Limit=1000)
            self.iterators[shard_id] = page.get("NextShardIterator")
            records.extend({**_jsonable(r), "eventSourceARN": self.arn} for r in page["Records"])
        return records


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


class Rig:
    """The whole embedded stack (see the module docstring). ``environment`` is the functions'
    environment (``KUBE_URL`` is added); ``boot_seconds`` is how long an instance takes to become a Node."""

    def __init__(
        self,
        environment: Mapping[str, str],
        *,
        cluster: str = CLUSTER,
        regions: Sequence[str] = REGIONS,
        boot_seconds: float = 0.3,
        tick: float = 0.1,
        prefix: str = "spillway",
    ) -> None:
        self.environment = dict(environment)
        self.cluster = cluster
        self.regions = tuple(regions)
        self.home = self.regions[0]
        self.boot_seconds = boot_seconds
        self.tick_seconds = tick
        self.prefix = prefix
        self.started_at = datetime.now(UTC)
        self._exit = ExitStack()
        self._saved: dict[str, str] = {}
        self._stream: SnapshotStream | None = None

    # --- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> Rig:
        self._saved = dict(os.environ)
        self._exit.callback(self._restore_environment)
        self.kube = KubeApiServer().start()
        self._exit.callback(self.kube.stop)
        try:
            self.stack = self._exit.enter_context(
                LocalStack(
                    parameters={"ClusterName": self.cluster, "Regions": ",".join(self.regions)},
                    region=self.home,
                    environment={**self.environment, "KUBE_URL": self.kube.url},
                    prefix=self.prefix,
                )
            )
            self.sim = self._exit.enter_context(CloudSim())
            self.registrar = NodeRegistrar(
                self.kube, cluster=self.cluster, regions=self.regions, boot_seconds=self.boot_seconds,
                tick=self.tick_seconds,
            ).start()  # fmt: skip
            self._exit.callback(self.registrar.stop)
            self._exit.callback(self.finish_executions)  # runs first: executions need the kubelets
        except BaseException:
            self._exit.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._exit.close()

    def _restore_environment(self) -> None:
        os.environ.clear()
        os.environ.update(self._saved)

    # --- AWS side ---------------------------------------------------------------------------------

    def group(
        self, name: str, *, region: str | None = None, instance_type: str = "g5.xlarge", desired: int = 0,
        max_size: int = 8, gpu: bool = True, zone: str = "a", spot: bool = False,
        capacity_rebalance: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """A group of this rig's cluster (GPU-tainted unless ``gpu=False``), in availability zone
        ``zone`` (a letter; several letters: a group over those zones) of its region; launching only
        Spot with ``spot``; with Capacity Rebalancing (``CapacityRebalance``) with ``capacity_rebalance``."""
        return create_group(
            name, region=region or self.home, instance_type=instance_type, desired=desired, max_size=max_size,
            cluster=self.cluster, gpu=gpu, zone=zone, spot=spot, capacity_rebalance=capacity_rebalance,
        )  # fmt: skip

    def asg(self, name: str, region: str | None = None) -> dict[str, Any]:
        return describe_group(name, region or self.home)

    def desired(self, name: str, region: str | None = None) -> int:
        return int(self.asg(name, region)["DesiredCapacity"])

    def instances(self) -> dict[str, str]:
        """Every instance of every group in the rig's regions: instance id → lifecycle state."""
        import boto3

        out: dict[str, str] = {}
        for region in self.regions:
            autoscaling = boto3.client("autoscaling", region_name=region)
            for group in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]:
                out.update({i["InstanceId"]: i["LifecycleState"] for i in group["Instances"]})
        return out

    # --- Kubernetes side --------------------------------------------------------------------------

    def wait_nodes(self, count: int, timeout: float = 10.0) -> list[str]:
        """Wait until at least ``count`` Nodes are registered; returns their names. Each Node the
        registrar added is in ``registrar.registered`` by then (listed under its ``joining`` lock)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.registrar.joining:
                nodes = [n["metadata"]["name"] for n in self.kube.list("Node")]
            if len(nodes) >= count:
                return nodes
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(nodes)} of {count} nodes registered: {self.registrar.errors}")
            time.sleep(0.05)

    # --- observing and planning -------------------------------------------------------------------

    def tick(self, event: Mapping[str, Any]) -> Any:
        """One schedule tick: the ObserveFunction with ``event``, then the PlanFunction on the stream
        records that are new since the last tick; returns the plan's result (None when there were none)."""
        self.stack.invoke("ObserveFunction", dict(event))
        if self._stream is None:
            self._stream = SnapshotStream(self.stack.tables["SnapshotsTable"], self.home)
        records = self._stream.read()
        return self.plan({"Records": records}) if records else None

    def snapshot(self, age: timedelta = timedelta(0)) -> str:
        """Observe now (dated ``age`` ago) with the real observe code and store it; returns its key. A
        region whose groups cannot be read carries them from the latest snapshot stored, as the observe
        function does (:func:`spillway.observe.carried_groups`)."""
        import boto3

        from spillway.adapters.aws import AwsAdapter, AwsClients
        from spillway.adapters.kube import KubeClient
        from spillway.adapters.store import SnapshotStore
        from spillway.observe import ObserveConfig, observe_once

        taken_at = datetime.now(UTC) - age
        ddb = boto3.client("dynamodb", region_name=self.home)
        store = SnapshotStore(ddb, self.stack.tables["SnapshotsTable"])
        kube = KubeClient.for_url(self.kube.url)
        try:
            snap = observe_once(
                kube, AwsAdapter(AwsClients(self.regions), self.cluster), ObserveConfig(cluster=self.cluster),
                lambda: taken_at, lambda: store.latest(self.cluster),
            )  # fmt: skip
        finally:
            kube.close()
        return store.save(snap)

    def stream_event(self, key: str) -> dict[str, Any]:
        """The Lambda event the snapshots stream delivers for that snapshot's INSERT."""
        records = [
            r
            for r in SnapshotStream(self.stack.tables["SnapshotsTable"], self.home).read()
            if _new_image(r).get("taken_at", {}).get("S") == key
            and _new_image(r).get("cluster", {}).get("S") == self.cluster
        ]
        if not records:
            raise AssertionError(f"no stream record for {key}")
        return {"Records": records}

    def plan(self, event: dict[str, Any]) -> Any:
        return self.stack.invoke("PlanFunction", event)

    def plans(self) -> list[dict[str, Any]]:
        return list(self.stack.client("dynamodb").scan(TableName=self.stack.tables["PlansTable"])["Items"])

    def state_item(self, item: str, partition: str = "{cluster}") -> dict[str, Any] | None:
        """The state table's ``item`` of the cluster's partition (``partition``: a template such as
        ``{cluster}#gangsweep``, formatted with the cluster)."""
        got = self.stack.client("dynamodb").get_item(
            TableName=self.stack.tables["StateTable"],
            Key={"cluster": {"S": partition.format(cluster=self.cluster)}, "item": {"S": item}},
        )
        found: dict[str, Any] | None = got.get("Item")
        return found

    def backoff_item(self, item: str) -> dict[str, Any] | None:
        """The back-off ``item`` (``backoff#...``), in the back-offs' partition."""
        return self.state_item(item, BACKOFFS_PARTITION)

    # --- executions -------------------------------------------------------------------------------

    def executions(self, machine: str = "ScaleUpStateMachine") -> list[dict[str, Any]]:
        sfn = self.stack.client("stepfunctions")
        return list(sfn.list_executions(stateMachineArn=self.stack.state_machines[machine])["executions"])

    def all_executions(self, status: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """(state machine logical id, execution) for every execution, of ``status`` if given."""
        sfn = self.stack.client("stepfunctions")
        extra = {"statusFilter": status} if status else {}
        for logical, arn in self.stack.state_machines.items():
            for execution in sfn.list_executions(stateMachineArn=arn, **extra)["executions"]:
                yield logical, execution

    def wait_all(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every execution of every state machine, finished (describe_execution, output parsed)."""
        return [self.stack.wait(e["executionArn"], timeout) for _, e in list(self.all_executions())]

    def finish_executions(self, timeout: float = 60.0) -> None:
        """moto runs executions in threads: let them end before the mock goes away."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and next(self.all_executions("RUNNING"), None) is not None:
            time.sleep(0.1)


def _new_image(record: Mapping[str, Any]) -> dict[str, Any]:
    image: dict[str, Any] = (record.get("dynamodb") or {}).get("NewImage") or {}
    return image
