"""``spillway demo``'s third scene: the night. Serving scales in at dusk, training takes the machines, an
elastic job is consolidated, a spot node is interrupted, and nothing is lost.

It runs on the same :class:`~spillway.local.rig.Rig` after scene 2, driven by the demo's ticks. The
planner's clock is driven, not waited for: the plan function's ``datetime`` is shifted forward (as
``tests/e2e/test_provisioning_request.py`` does), only ever forward and by less than two minutes, to the
edges of windows configured relative to the scene's start. ``PLANNER_CONFIG`` is replaced at the
scene's start (the functions rebuild their clients when their environment changes): scene 2's tenants,
plus a serving ``buffers`` entry open until *dusk* and a training tenant whose ``schedule`` opens at
*night* (one minute later), both in Europe/Berlin.

1. groups appear in us-east-1: ``serving`` (m5.xlarge, label ``pool=serving``), ``gpu-train`` (g5.xlarge),
   ``elastic`` (m5.xlarge, tainted ``dedicated=training``, tagged ``spillway.io/consolidation:
   when-underutilized``, 2 nodes) and ``spot`` (m5.large, a mixed instances policy with no on-demand,
   tagged ``spillway.io/capacity-type: spot``, 1 node). On the elastic nodes: elastic PyTorch job ``nlp/bert`` (4 workers, ``PET_NNODES=2:4``, ``PET_MAX_RESTARTS=3``,
   Kubeflow labels, a PDB of ``minAvailable: 2``, each with ``/dev/shm`` in memory and a dataset cache in
   an emptyDir on disk) and, on each node, a preprocessing pod of a plain Job (not movable). On the spot
   node: two ``crawl`` ReplicaSet pods, ``safe-to-evict: "true"``, a page cache in an emptyDir, a PDB of
   ``minAvailable: 1``. Three 1-GPU training pods of tenant ``train`` (``/dev/shm``) arrive: by day it may add no GPU;
2. by day the buffer's two virtual pods open two serving nodes, which the plan keeps (``buffer``);
3. dusk (the clock is moved past the buffer's window): the serving nodes are idle and scale-down drains
   them; then night (the clock is moved again): training's night limit opens and the burst takes GPU
   machines;
4. once training runs, the preprocessing pods complete: the elastic nodes are underutilised and the plan
   consolidates one of them; its DrainNode evicts the two workers above the job's minimum through the PDB
   and terminates the instance; the other node, at the minimum, is kept;
5. EC2 warns that the spot node will be interrupted: the event goes EventBridge -> SQS -> the interrupt
   function -> a DrainNode with a deadline; the crawlers move one at a time (the ReplicaSet replaces them)
   and the instance is terminated inside the deadline;
6. the jobs finish and every node of the scene is drained.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from spillway.local import objects as o
from spillway.local.demo_teams import TENANTS
from spillway.local.rig import GPU_TOLERATION, HOME, create_group

if TYPE_CHECKING:
    from spillway.local.demo import Demo
    from spillway.local.rig import Rig

ZONE = "Europe/Berlin"
# a training pod's /dev/shm: an emptyDir in memory, no local storage (README, "Local storage")
SHM = ("dshm", "/dev/shm", {"medium": "Memory"})


def _mounts(raw: dict[str, Any], *volumes: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """``raw`` with an emptyDir volume per (name, mount path, emptyDir source), mounted in its container."""
    raw["spec"]["volumes"] = [{"name": name, "emptyDir": source} for name, _, source in volumes]
    raw["spec"]["containers"][0]["volumeMounts"] = [
        {"name": name, "mountPath": path} for name, path, _ in volumes
    ]
    return raw


POOL = "pool"
LABEL_TAG = "k8s.io/cluster-autoscaler/node-template/label/"
TAINT_TAG = "k8s.io/cluster-autoscaler/node-template/taint/"
SERVING, TRAIN, ELASTIC, SPOT = "serving", "gpu-train", "elastic", "spot"
GROUPS = (SERVING, TRAIN, ELASTIC, SPOT)
TRAINING_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
KUBEFLOW_JOB = "training.kubeflow.org/job-name"
KUBEFLOW_ROLE = "training.kubeflow.org/replica-type"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ELASTIC_MIN = 2
PLAN_MODULE = "spillway_fn_plan_app"
ACCOUNT = "123456789012"


@dataclass
class NightPod:
    namespace: str
    name: str
    role: str  # train, prep, worker, crawler
    movable: bool
    run_for: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    node: str | None = None
    starts: int = 0
    evicted: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class NightResult:
    """What the scene saw, for the test."""

    pods: list[NightPod] = field(default_factory=list)
    held_by_day: dict[str, str] = field(default_factory=dict)  # pod -> tenant-limit reason
    buffer_kept: dict[str, str] = field(default_factory=dict)  # serving node -> the plan's reason
    serving_nodes: set[str] = field(default_factory=set)
    serving_drains: dict[str, str] = field(default_factory=dict)  # node -> the plan's drain reason
    consolidation: dict[str, Any] = field(default_factory=dict)  # the plan's drain entry
    consolidated: dict[str, Any] = field(default_factory=dict)  # the drain's outcome
    elastic_kept: dict[str, str] = field(default_factory=dict)  # elastic node -> kept code
    min_workers_running: int | None = None  # the fewest workers running at once, after they started
    interrupt: dict[str, Any] = field(default_factory=dict)
    evictions: list[tuple[str, int]] = field(default_factory=list)  # (pod, status) in the scene's namespaces
    instances: dict[str, str] = field(default_factory=dict)  # instance -> group, every one of the scene
    drained_instances: set[str] = field(default_factory=set)
    running_at_end: set[str] = field(default_factory=set)  # the scene's instances still InService
    clock: dict[str, str] = field(default_factory=dict)  # dusk, night: the planner's time (Berlin)
    done: bool = False


def night_config(dusk: datetime) -> dict[str, Any]:
    """The scene's ``PLANNER_CONFIG``: scene 2's tenants, a serving buffer open until ``dusk``, training's
    night limit from a minute later (windows in Europe/Berlin)."""
    local = dusk.astimezone(ZoneInfo(ZONE))
    night = local + timedelta(minutes=1)

    def hhmm(t: datetime) -> str:
        return t.strftime("%H:%M")

    return {
        "tenants": {
            **TENANTS,
            "train": {
                "limits": {"nvidia.com/gpu": "0"},
                "schedule": [{"windows": [{"start": hhmm(night), "end": hhmm(night + timedelta(hours=10)),
                                           "timezone": ZONE}],
                              "limits": {"nvidia.com/gpu": "4"}}],
            },
        },
        "buffers": [
            {"name": "serving", "replicas": 2,
             "pod": {"cpu": "3", "memory": "4Gi", "node_selector": {POOL: SERVING}},
             "windows": [{"start": hhmm(local - timedelta(hours=12)), "end": hhmm(local), "timezone": ZONE}]},
        ],
    }  # fmt: skip


class PlanClock:
    """The plan function's clock: real time plus a forward offset (its module's ``datetime`` replaced)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)
        self._saved: Any = None

    def install(self) -> None:
        module = sys.modules.get(PLAN_MODULE)
        if module is None:
            raise RuntimeError("the plan function has not run yet: nothing to shift")
        clock = self

        class ShiftedDatetime(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                return datetime.now(tz) + clock.offset

        self._saved = getattr(module, "datetime")  # noqa: B009  (a function module: untyped to mypy)
        setattr(module, "datetime", ShiftedDatetime)  # noqa: B010

    def uninstall(self) -> None:
        module = sys.modules.get(PLAN_MODULE)
        if module is not None and self._saved is not None:
            setattr(module, "datetime", self._saved)  # noqa: B010
        self._saved = None

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def move_to(self, at: datetime) -> None:
        """Forward only."""
        self.offset = max(self.offset, at - datetime.now(UTC))


def _berlin(t: datetime) -> str:
    return t.astimezone(ZoneInfo(ZONE)).strftime("%H:%M:%S %Z")


class NightScene:
    """The third scene (see the module docstring), stepped by the demo's loop."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.result = NightResult()
        self.started = False
        self.clock = PlanClock()
        self.dusk = datetime.now(UTC)
        self.phase = "day"
        self.pods: dict[str, NightPod] = {}
        self.crawlers = 0
        self.spot_instance: str | None = None
        self.spot_node: str | None = None
        self.job_done = False
        self.elastic_nodes: list[str] = []

    def say(self, kind: str, text: str) -> None:
        self.demo.say(kind, text)

    # -- setup --

    def start(self, rig: Rig) -> None:
        import os

        self.started = True
        now = datetime.now(UTC)
        # Dusk at the first whole minute at least 30 s away: the buffer's window ends there.
        self.dusk = (now + timedelta(seconds=90)).replace(second=0, microsecond=0)
        os.environ["PLANNER_CONFIG"] = json.dumps(night_config(self.dusk), separators=(",", ":"))
        self.clock.install()
        self.say("night", f"scene 3, the night: PLANNER_CONFIG adds buffer serving (2 x 3 CPU on pool=serving) "
                          f"until {_berlin(self.dusk)[:5]} {ZONE} and tenant train's limit (0 GPUs by day, 4 from "
                          f"{_berlin(self.dusk + timedelta(minutes=1))[:5]}); the plan's clock reads "
                          f"{_berlin(self.clock.now())}")  # fmt: skip
        rig.kube.add({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "train", "labels": {"spillway.io/tenant": "train"}}})  # fmt: skip
        create_group(SERVING, region=HOME, instance_type="m5.xlarge", cluster=rig.cluster,
                     tags={f"{LABEL_TAG}{POOL}": SERVING})  # fmt: skip
        create_group(TRAIN, region=HOME, instance_type="g5.xlarge", cluster=rig.cluster, gpu=True,
                     tags={f"{LABEL_TAG}{POOL}": "train"})  # fmt: skip
        create_group(ELASTIC, region=HOME, instance_type="m5.xlarge", desired=2, cluster=rig.cluster,
                     tags={f"{LABEL_TAG}{POOL}": ELASTIC, f"{TAINT_TAG}dedicated": "training:NoSchedule",
                           "spillway.io/consolidation": "when-underutilized"})  # fmt: skip
        create_group(SPOT, region=HOME, instance_type="m5.large", desired=1, cluster=rig.cluster, spot=True,
                     tags={f"{LABEL_TAG}{POOL}": SPOT, "spillway.io/capacity-type": "spot"})  # fmt: skip
        self.say("setup", f"groups: {SERVING} (m5.xlarge, 0), {TRAIN} (g5.xlarge, 0), {ELASTIC} (m5.xlarge, 2, "
                          "tainted dedicated=training, spillway.io/consolidation: when-underutilized), "
                          f"{SPOT} (m5.large, 1, spillway.io/capacity-type: spot)")  # fmt: skip
        nodes = self._wait_pool_nodes(rig, {ELASTIC: 2, SPOT: 1})
        self._start_workloads(rig, nodes)

    def _wait_pool_nodes(self, rig: Rig, want: dict[str, int], timeout: float = 20.0) -> dict[str, list[str]]:
        deadline = time.monotonic() + timeout
        while True:
            found = self._pool_nodes(rig)
            if all(len(found.get(pool, [])) >= n for pool, n in want.items()):
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"scene 3's nodes never registered: {found} {rig.registrar.errors}")
            time.sleep(0.05)

    @staticmethod
    def _pool_nodes(rig: Rig) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for node in rig.kube.list("Node"):
            pool = (node["metadata"].get("labels") or {}).get(POOL)
            if pool:
                found.setdefault(pool, []).append(node["metadata"]["name"])
        return {k: sorted(v) for k, v in found.items()}

    def _start_workloads(self, rig: Rig, nodes: dict[str, list[str]]) -> None:
        kube, created = rig.kube, datetime.now(UTC)
        self.elastic_nodes = list(nodes[ELASTIC])
        for i, node in enumerate(nodes[ELASTIC]):
            prep = NightPod("nlp", f"prep-{i}", "prep", movable=False)
            kube.add(o.pod(prep.name, "nlp", cpu="500m", memory="1Gi", node_name=node, owner=("Job", f"prep-{i}"),
                           tolerations=[TRAINING_TOLERATION], labels={"app": "prep"}, created=created))  # fmt: skip
            self._track(prep, node)
            for j in range(2):
                self._worker(kube, f"bert-worker-{2 * i + j}", node, created)
        kube.add(o.pdb("bert", "nlp", {KUBEFLOW_JOB: "bert"}, min_available=ELASTIC_MIN))
        self.spot_node = nodes[SPOT][0]
        self.spot_instance = next(i for i, n in dict(rig.registrar.registered).items() if n == self.spot_node)
        for _ in range(2):
            self._crawler(kube, self.spot_node)
        kube.add(o.pdb("crawl", "crawl", {"app": "crawl"}, min_available=1))
        self.say("setup", f"nlp/bert: elastic PyTorch job, 4 workers (PET_NNODES={ELASTIC_MIN}:4, PET_MAX_RESTARTS=3, "
                          f"Kubeflow labels, "
                          f"PDB minAvailable {ELASTIC_MIN}, /dev/shm and a dataset cache on local disk) on "
                          f"{', '.join(nodes[ELASTIC])}, beside a preprocessing Job pod each (not movable)")  # fmt: skip
        self.say("setup", f"crawl: 2 ReplicaSet pods (safe-to-evict: true, an emptyDir page cache, PDB minAvailable 1) "
                          f"on spot node {self.spot_node} ({self.spot_instance})")  # fmt: skip
        for i in range(3):
            pod = NightPod("train", f"train-{i}", "train", movable=False, run_for=4.0)
            kube.add(_mounts(o.pod(pod.name, "train", cpu="3", memory="12Gi", gpus=1, owner=("Job", pod.name),
                                   tolerations=[GPU_TOLERATION], node_selector={POOL: "train"},
                                   labels={"app": "train"}, created=created), SHM))  # fmt: skip
            self._track(pod, None)
        self.say("arrive", "train submits 3 one-GPU training pods (tenant train)")

    def _worker(self, kube: Any, name: str, node: str, created: datetime) -> None:
        raw = o.pod(name, "nlp", cpu="750m", memory="3Gi", node_name=node, tolerations=[TRAINING_TOLERATION],
                    node_selector={POOL: ELASTIC}, labels={KUBEFLOW_JOB: "bert", KUBEFLOW_ROLE: "worker"},
                    owner=("PyTorchJob", "bert"), created=created)  # fmt: skip
        raw["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v1"
        # as the training operator passes elasticPolicy minReplicas/maxReplicas and maxRestarts: torchrun
        # restarts the workers a moved one leaves (README, "Elastic jobs")
        raw["spec"]["containers"][0]["env"] = [{"name": "PET_NNODES", "value": f"{ELASTIC_MIN}:4"},
                                               {"name": "PET_MAX_RESTARTS", "value": "3"}]  # fmt: skip
        # shared memory for the data loaders, and a dataset cache on the node's disk: local storage, which
        # an elastic worker's opt-in overrides (README, "Local storage")
        kube.add(_mounts(raw, SHM, ("cache", "/data/cache", {})))
        self._track(NightPod("nlp", name, "worker", movable=True), node)

    def _crawler(self, kube: Any, node: str | None) -> None:
        name = f"crawl-{self.crawlers}"
        self.crawlers += 1
        raw = o.pod(name, "crawl", cpu="250m", memory="256Mi", node_name=node, owner=("ReplicaSet", "crawl-6b8d"),
                    labels={"app": "crawl"}, annotations={SAFE_TO_EVICT: "true"}, created=datetime.now(UTC))  # fmt: skip
        kube.add(_mounts(raw, ("pages", "/var/cache/crawl", {})))  # its page cache: safe-to-evict lets it go
        self._track(NightPod("crawl", name, "crawler", movable=True), node)

    def _track(self, pod: NightPod, node: str | None) -> None:
        if node is not None:
            pod.node, pod.started_at, pod.starts = node, self.demo.now(), 1
        self.pods[pod.key] = pod
        self.result.pods.append(pod)

    # -- each tick --

    def step(self, rig: Rig) -> bool:
        """One tick; True once the scene is over."""
        self._instances()
        self._bound(rig)
        self._gone(rig)
        self._complete(rig)
        self._crawl_controller(rig)
        self._story(rig)
        if not self._settled(rig):
            return False
        self.clock.uninstall()
        self.say("night_done", "scene 3: every training, preprocessing and elastic pod completed once; no pod "
                               "that may not move was evicted; every node of the scene drained")  # fmt: skip
        self.result.done = True
        return True

    def close(self) -> None:
        self.clock.uninstall()

    def _instances(self) -> None:
        """Every instance the scene's groups hold now, remembered (for the accounting at the end)."""
        import boto3

        autoscaling = boto3.client("autoscaling", region_name=HOME)
        for group in autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=list(GROUPS))[
            "AutoScalingGroups"
        ]:
            for instance in group["Instances"]:
                self.result.instances[instance["InstanceId"]] = group["AutoScalingGroupName"]

    def _bound(self, rig: Rig) -> None:
        for pod in self.pods.values():
            if pod.started_at is not None:
                continue
            node = ((rig.kube.get("Pod", pod.name, pod.namespace) or {}).get("spec") or {}).get("nodeName")
            if node:
                pod.started_at, pod.node, pod.starts = self.demo.now(), node, pod.starts + 1

    def _gone(self, rig: Rig) -> None:
        """Pods that disappeared while running without completing: evicted (the drains' doing)."""
        for pod in self.pods.values():
            if pod.started_at is None or pod.finished_at is not None or pod.evicted:
                continue
            raw = rig.kube.get("Pod", pod.name, pod.namespace)
            if raw is None or (raw.get("metadata") or {}).get("deletionTimestamp"):
                pod.evicted = True
        workers = [p for p in self.pods.values() if p.role == "worker"]
        if not self.job_done:
            running = sum(1 for p in workers if not p.evicted and p.finished_at is None)
            low = self.result.min_workers_running
            self.result.min_workers_running = running if low is None else min(low, running)

    def _complete(self, rig: Rig) -> None:
        now = self.demo.now()
        for pod in self.pods.values():
            if pod.role != "train" or pod.started_at is None or pod.finished_at is not None:
                continue
            if now - pod.started_at >= pod.run_for:
                self._finish(rig, pod)

    def _finish(self, rig: Rig, pod: NightPod) -> None:
        raw = rig.kube.get("Pod", pod.name, pod.namespace)
        if raw is not None:
            raw["status"]["phase"] = "Succeeded"
            rig.kube.update("Pod", raw)
            rig.kube.delete("Pod", pod.name, pod.namespace)  # the Job's TTL
        pod.finished_at = self.demo.now()
        self.say("night_finish", f"{pod.key} completed on {pod.node}")

    def _crawl_controller(self, rig: Rig) -> None:
        """The crawlers' ReplicaSet: an evicted replica is replaced (pending, for the scheduler)."""
        live = [p for p in self.pods.values() if p.role == "crawler" and not p.evicted]
        for _ in range(2 - len(live)):
            self._crawler(rig.kube, None)
            self.say(
                "replace",
                f"ReplicaSet crawl-6b8d: replacement crawl/crawl-{self.crawlers - 1} created (pending)",
            )

    def _story(self, rig: Rig) -> None:
        pools = self._pool_nodes(rig)
        if self.phase == "day" and len(self.result.buffer_kept) >= 2:
            self.clock.move_to(self.dusk + timedelta(seconds=1))
            self.phase = "dusk"
            self.result.clock["dusk"] = _berlin(self.clock.now())
            self.say("dusk", f"dusk: the plan's clock moves to {_berlin(self.clock.now())}: buffer serving's "
                             "window has closed")  # fmt: skip
        elif self.phase == "dusk" and len(self.result.serving_drains) >= 2 and not pools.get(SERVING):
            self.clock.move_to(self.dusk + timedelta(minutes=1, seconds=1))
            self.phase = "night"
            self.result.clock["night"] = _berlin(self.clock.now())
            self.say("nightfall", f"night: the plan's clock moves to {_berlin(self.clock.now())}: tenant train's "
                                  "night limit (4 GPUs) is open")  # fmt: skip
        elif self.phase == "night" and all(
            p.started_at is not None for p in self.pods.values() if p.role == "train"
        ):
            self.say("train_runs", "training holds the GPU machines the night gave it: all 3 pods running")
            for pod in (p for p in self.pods.values() if p.role == "prep"):
                self._finish(rig, pod)
            self.phase = "consolidate"
        elif self.phase == "consolidate" and self.result.consolidation:
            self._interrupt(rig)
            self.phase = "spot"
        elif self.phase == "spot" and self.result.consolidated and self.result.interrupt.get("outcome"):
            for pod in (p for p in self.pods.values() if p.role == "worker" and not p.evicted):
                self._finish(rig, pod)
            self.job_done = True
            self.say("job_done", f"nlp/bert completed on its {ELASTIC_MIN} remaining workers")
            self.phase = "cleanup"

    def _settled(self, rig: Rig) -> bool:
        if self.phase != "cleanup" or any(
            p.finished_at is None for p in self.pods.values() if p.role != "crawler" and not p.evicted
        ):
            return False
        pools = self._pool_nodes(rig)
        if any(pools.get(p) for p in (SERVING, "train", ELASTIC, SPOT)):
            return False
        return not [a for a, s in self.demo.executions.items() if s == "RUNNING"]

    # -- the spot interruption --

    def _interrupt(self, rig: Rig) -> None:
        import boto3

        assert self.spot_instance is not None
        boto3.client("events", region_name=HOME).put_events(
            Entries=[{
                "Source": "aws.ec2", "DetailType": "EC2 Spot Instance Interruption Warning",
                "Detail": json.dumps({"instance-id": self.spot_instance, "instance-action": "terminate"}),
                "Resources": [f"arn:aws:ec2:{HOME}:{ACCOUNT}:instance/{self.spot_instance}"],
            }]
        )  # fmt: skip
        warned = self.demo.now()
        self.result.interrupt.update(instance=self.spot_instance, node=self.spot_node, warned_at=warned)
        self.say("spot_warning", f"EC2: Spot Instance Interruption Warning for {self.spot_instance} ({self.spot_node}) "
                                 "on the default event bus")  # fmt: skip
        sqs = boto3.client("sqs", region_name=HOME)
        url = rig.stack.queues["InterruptQueue"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages"
        )
        self.result.interrupt["messages"] = len(messages or [])
        answer = rig.stack.invoke("InterruptFunction", _sqs_event(arn, list(messages or [])))
        self.say("spot_queue", f"the rule put it on {url.rsplit('/', 1)[-1]} ({len(messages or [])} message); "
                               f"InterruptFunction: {answer}")  # fmt: skip

    # -- what the functions decided --

    def on_plan(self, plan: dict[str, Any]) -> None:
        for entry in plan.get("pending") or []:
            pod, code = str(entry.get("pod")), entry.get("code")
            if code == "tenant-limit" and pod.startswith("train/") and pod not in self.result.held_by_day:
                self.result.held_by_day[pod] = str(entry.get("reason"))
                self.say("night_held", f"plan: {pod} stays pending ({code}): {entry.get('reason')}")
        for kept in plan.get("kept") or []:
            node, code = str(kept.get("node")), kept.get("code")
            if code == "buffer" and node not in self.result.buffer_kept:
                self.result.buffer_kept[node] = str(kept.get("reason"))
                self.say("buffer_kept", f"plan: keep {node}: {kept.get('reason')}")
            if node in self.elastic_nodes and self.result.consolidation:
                self.result.elastic_kept.setdefault(node, str(code))
        for drain in plan.get("drain") or []:
            self._on_drain(drain)

    def _on_drain(self, drain: dict[str, Any]) -> None:
        node, group = str(drain.get("node")), drain.get("group")
        if group == SERVING and node not in self.result.serving_drains:
            self.result.serving_drains[node] = str(drain.get("reason"))
            self.say("serving_drain", f"plan: drain serving node {node}: {drain.get('reason')}")
        elif group == ELASTIC and drain.get("code") == "consolidation" and not self.result.consolidation:
            self.result.consolidation = dict(drain)
            self.say("consolidate_plan", f"plan: consolidate {node}, moving {', '.join(drain.get('pods') or [])}: "
                                         f"{drain.get('reason')}")  # fmt: skip

    def on_drain_outcome(self, name: str, d: dict[str, Any]) -> None:
        """A drain's outcome line (a scale-down's, or an interrupt's DrainNode output)."""
        node = str(d.get("node"))
        instance = d.get("instance_id") or (d.get("terminated") or {}).get("instance_id")
        if d.get("outcome") == "terminated" and isinstance(instance, str):
            self.result.drained_instances.add(instance)
        if (
            self.result.consolidation
            and node == self.result.consolidation.get("node")
            and not self.result.consolidated
        ):
            self.result.consolidated = dict(d)
            self.say("consolidated", f"{name}: {node}: {d.get('outcome')}, {d.get('evicted_count', '?')} elastic "
                                     f"worker(s) evicted through the PDB; nlp/bert runs on at its minimum "
                                     f"({ELASTIC_MIN})")  # fmt: skip

    def print_interrupt_execution(self, name: str, status: str, output: dict[str, Any]) -> None:
        took = self.demo.now() - float(self.result.interrupt.get("warned_at") or 0.0)
        self.result.interrupt.update(status=status, outcome=output.get("outcome"), took=took,
                                     evicted=list(output.get("evicted") or []), execution=name)  # fmt: skip
        self.on_drain_outcome(name, output)
        self.say(
            "spot_drained",
            f"{name}: {status}: {output.get('node')} {output.get('outcome')} {took:.1f} s "
            f"after the warning (deadline 90 s), evicted {', '.join(output.get('evicted') or [])}",
        )

    # -- the end --

    def account(self, rig: Rig) -> None:
        """Every instance the scene's groups had and which still run, and every eviction in its namespaces."""
        if self.started:
            self._instances()
        self.result.running_at_end = {i for i, state in rig.instances().items() if i in self.result.instances
                                      and state == "InService"}  # fmt: skip
        self.result.evictions = [
            (r.path.split("/")[-2], r.status)
            for r in rig.kube.requests
            if r.method == "POST" and r.path.endswith("/eviction")
            and any(f"/namespaces/{ns}/" in r.path for ns in ("nlp", "crawl", "train"))
        ]  # fmt: skip


def _sqs_event(queue_arn: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Received SQS messages as the Lambda event source mapping hands them over."""
    return {"Records": [
        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
         "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
         "messageAttributes": {}, "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs",
         "eventSourceARN": queue_arn, "awsRegion": HOME}
        for m in messages
    ]}  # fmt: skip
