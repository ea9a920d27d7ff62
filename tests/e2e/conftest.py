"""End-to-end rig: template.yaml on moto (LocalStack) with CloudSim, the Kubernetes API emulator and
kubelets (NodeRegistrar). The real plan and scale handlers answer the Lambda tasks; moto executes the
real ASL. Waits come from the execution input, so the tests pass small ones.

Two regions: us-east-1 (the stack's own, primary) and us-west-2. Groups are tagged for cluster ``ml``.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from spillway import clients as spillway_clients
from spillway.adapters.aws import AwsAdapter, AwsClients
from spillway.adapters.kube import KubeClient
from spillway.adapters.store import SnapshotStore
from spillway.local import objects as o
from spillway.local.cloud import CloudSim, NodeRegistrar
from spillway.local.kubeapi import KubeApiServer
from spillway.local.stack import LocalStack
from spillway.observe import ObserveConfig, observe_once

CLUSTER = "ml"
HOME = "us-east-1"
WEST = "us-west-2"
REGIONS = (HOME, WEST)
AMI = "ami-12c6146b"
GPU_TAINT = "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ENVIRONMENT = {
    "CLUSTER_ACCESS": "url",
    "SCALE_UP_POLL_SECONDS": "1",
    "LAUNCH_TIMEOUT_SECONDS": "20",
    "MAX_SNAPSHOT_AGE_SECONDS": "180",
    "POWERTOOLS_METRICS_NAMESPACE": "Spillway",
    "POWERTOOLS_TRACE_DISABLED": "true",
}


@dataclass
class Cloud:
    """The running rig, and what the tests do with it."""

    stack: LocalStack
    sim: CloudSim
    kube: KubeApiServer
    registrar: NodeRegistrar
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    # --- AWS side ---------------------------------------------------------------------------------

    def group(
        self,
        name: str,
        *,
        region: str = HOME,
        instance_type: str = "g5.xlarge",
        desired: int = 0,
        max_size: int = 8,
        gpu: bool = True,
    ) -> None:
        """An Auto Scaling group tagged for the cluster the cluster-autoscaler way."""
        boto3.client("ec2", region_name=region).create_launch_template(
            LaunchTemplateName=f"lt-{name}",
            LaunchTemplateData={"ImageId": AMI, "InstanceType": instance_type},
        )
        tags = {"k8s.io/cluster-autoscaler/enabled": "true", f"k8s.io/cluster-autoscaler/{CLUSTER}": "owned"}
        if gpu:
            tags[GPU_TAINT] = "present:NoSchedule"
        boto3.client("autoscaling", region_name=region).create_auto_scaling_group(
            AutoScalingGroupName=name,
            MinSize=0,
            MaxSize=max_size,
            DesiredCapacity=desired,
            AvailabilityZones=[f"{region}a"],
            # Overrides name the instance type, so an empty group still has a template node.
            MixedInstancesPolicy={
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": f"lt-{name}", "Version": "$Latest"},
                    "Overrides": [{"InstanceType": instance_type}],
                }
            },
            Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": True} for k, v in tags.items()],
        )

    def asg(self, name: str, region: str = HOME) -> dict[str, Any]:
        found: dict[str, Any] = boto3.client("autoscaling", region_name=region).describe_auto_scaling_groups(
            AutoScalingGroupNames=[name]
        )["AutoScalingGroups"][0]
        return found

    def desired(self, name: str, region: str = HOME) -> int:
        return int(self.asg(name, region)["DesiredCapacity"])

    # --- Kubernetes side --------------------------------------------------------------------------

    def pending_gpu_pods(self, prefix: str, count: int) -> list[str]:
        for i in range(count):
            self.kube.add(
                o.pod(f"{prefix}-{i}", "ml", cpu="3", memory="12Gi", gpus=1, tolerations=[GPU_TOLERATION])
            )
        return [f"ml/{prefix}-{i}" for i in range(count)]

    def wait_nodes(self, count: int, timeout: float = 10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            nodes = [n["metadata"]["name"] for n in self.kube.list("Node")]
            if len(nodes) >= count:
                return nodes
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(nodes)} of {count} nodes registered: {self.registrar.errors}")
            time.sleep(0.05)

    # --- observing and planning -------------------------------------------------------------------

    def snapshot(self, age: timedelta = timedelta(0)) -> str:
        """Observe now (dated ``age`` ago) with the real observe code and store it; returns its key."""
        taken_at = datetime.now(UTC) - age
        kube = KubeClient.for_url(self.kube.url)
        try:
            snap = observe_once(
                kube,
                AwsAdapter(AwsClients(REGIONS), CLUSTER),
                ObserveConfig(cluster=CLUSTER),
                lambda: taken_at,
            )
        finally:
            kube.close()
        store = SnapshotStore(boto3.client("dynamodb", region_name=HOME), self.stack.tables["SnapshotsTable"])
        return store.save(snap)

    def stream_event(self, key: str) -> dict[str, Any]:
        """The Lambda event the snapshots table's stream delivers for that snapshot's INSERT, read from
        moto's DynamoDB Streams (binary attributes base64-encoded, as Lambda delivers them)."""
        table = self.stack.tables["SnapshotsTable"]
        arn = boto3.client("dynamodb", region_name=HOME).describe_table(TableName=table)["Table"][
            "LatestStreamArn"
        ]
        # botocore 1.44 addresses <account>.streams-ddb.<region>; moto 5.2.5 answers the classic endpoint.
        streams = boto3.client(
            "dynamodbstreams", region_name=HOME, endpoint_url=f"https://streams.dynamodb.{HOME}.amazonaws.com"
        )
        records: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for record in streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]:
                image = record["dynamodb"].get("NewImage", {})
                if image.get("taken_at", {}).get("S") == key and image.get("cluster", {}).get("S") == CLUSTER:
                    records.append({**_jsonable(record), "eventSourceARN": arn})
        assert records, f"no stream record for {key}"
        return {"Records": records}

    def plan(self, event: dict[str, Any]) -> Any:
        return self.stack.invoke("PlanFunction", event)

    # --- executions -------------------------------------------------------------------------------

    def executions(self, machine: str = "ScaleUpStateMachine") -> list[dict[str, Any]]:
        sfn = self.stack.client("stepfunctions")
        arn = self.stack.state_machines[machine]
        return list(sfn.list_executions(stateMachineArn=arn)["executions"])

    def wait_all(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every execution of every state machine, finished (describe_execution, output parsed)."""
        sfn = self.stack.client("stepfunctions")
        done = []
        for arn in self.stack.state_machines.values():
            for execution in sfn.list_executions(stateMachineArn=arn)["executions"]:
                done.append(self.stack.wait(execution["executionArn"], timeout))
        return done

    def plans(self) -> list[dict[str, Any]]:
        ddb = boto3.client("dynamodb", region_name=HOME)
        return list(ddb.scan(TableName=self.stack.tables["PlansTable"])["Items"])

    def state_item(self, item: str) -> dict[str, Any] | None:
        ddb = boto3.client("dynamodb", region_name=HOME)
        got = ddb.get_item(
            TableName=self.stack.tables["StateTable"], Key={"cluster": {"S": CLUSTER}, "item": {"S": item}}
        )
        found: dict[str, Any] | None = got.get("Item")
        return found


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


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    saved = dict(os.environ)
    spillway_clients.reset()
    kube = KubeApiServer().start()
    environment = {**ENVIRONMENT, "KUBE_URL": kube.url}
    try:
        with (
            LocalStack(
                parameters={"ClusterName": CLUSTER, "Regions": ",".join(REGIONS)},
                region=HOME,
                environment=environment,
            ) as stack,
            CloudSim() as sim,
        ):
            registrar = NodeRegistrar(kube, cluster=CLUSTER, regions=REGIONS, boot_seconds=0.3, tick=0.1)
            rig = Cloud(stack=stack, sim=sim, kube=kube, registrar=registrar.start())
            try:
                yield rig
                assert not registrar.errors, registrar.errors
            finally:
                _finish_executions(rig)
                registrar.stop()
    finally:
        kube.stop()
        spillway_clients.reset()
        os.environ.clear()
        os.environ.update(saved)


def _finish_executions(rig: Cloud, timeout: float = 60.0) -> None:
    """moto runs executions in threads: let them end before the mock goes away."""
    deadline = time.monotonic() + timeout
    sfn = rig.stack.client("stepfunctions")
    while time.monotonic() < deadline:
        running = [
            e
            for arn in rig.stack.state_machines.values()
            for e in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]
        ]
        if not running:
            return
        time.sleep(0.1)
