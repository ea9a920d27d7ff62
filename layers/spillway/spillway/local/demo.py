"""``spillway demo``: the whole system, end to end, on one machine.

The stack is :class:`~spillway.local.rig.Rig`, the one the e2e tests run on: AWS is moto in-process
(``template.yaml``'s tables, the real handlers answering the Lambda tasks, the real state machines
executed by moto), made AWS-like by CloudSim; the cluster is the Kubernetes API emulator, whose Nodes come
from the instances after a boot delay. Two regions, us-east-1 (primary) and us-west-2, with a CPU and a
GPU group in each, tagged for cluster ``ml``. This module is the demo's story only.

The script, driven in real time with short thresholds (through the functions' environment) and short
waits (through the executions' inputs), never by skipping a step:

1. a burst of 8-GPU jobs from the Philly trace arrives as pods (one virtual cluster, a few minutes of
   submissions, durations and gaps divided by ``time_scale``);
2. each tick the real ObserveFunction observes the cluster and stores a snapshot; the snapshots table's
   stream record goes to the real PlanFunction, which plans and starts the scale-up execution;
3. once the first wave's nodes are up, the primary GPU group runs out of capacity (CloudSim injects
   InsufficientInstanceCapacity) and the second wave arrives: the scale-up execution backs the group off
   and overflows into us-west-2;
4. a small scheduler (:func:`schedule`) binds pending pods where they fit; jobs finish after their scaled
   durations (Succeeded, then deleted as a Job's TTL would);
5. idle GPU nodes are drained and terminated by the scale-down execution, overflow region first;
6. an operator drains a CPU node by hand: a DrainNode execution with ``events/drain-node.json``'s input;
7. scene 2, the shared cluster (:mod:`spillway.local.demo_teams`, ``DemoOptions.teams``): two teams burst
   at once, team-b is held by its GPU limit (``PLANNER_CONFIG``), a gang is launched atomically through
   the GangLaunch state machine, and a second gang's atomic launch fails and leaves nothing behind;
8. scene 3, the night (:mod:`spillway.local.demo_night`, ``DemoOptions.night``): a serving buffer's window
   closes at dusk and its nodes are drained, training's night limit opens and a burst takes GPU machines,
   an elastic job is consolidated to its minimum, a spot node is interrupted (EventBridge -> SQS -> the
   interrupt function -> DrainNode), and nothing is lost.

It prints a timeline (elapsed seconds, what was decided and why) and writes a PNG chart of capacity
against demand per region. The functions' own JSON logs and EMF metrics go to a log file beside it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from spillway.errors import InputError
from spillway.local import objects as o
from spillway.local.demo_night import NightResult, NightScene
from spillway.local.demo_teams import SceneResult, TeamsScene, scene_tenants
from spillway.local.rig import CLUSTER, GPU_TOLERATION, HOME, REGIONS, WEST, Rig
from spillway.local.stack import ROOT
from spillway.model.cluster import NodeInfo, PodInfo
from spillway.model.k8s import Node, Pod
from spillway.model.resources import NVIDIA_GPU, Resources, fits, subtract
from spillway.planner.predicates import preferred_against, why_not_placeable

NAMESPACE = "ml"
GPU_TYPE = "p3.16xlarge"  # 8 V100s, as Philly's 8-GPU servers
CPU_TYPE = "m5.xlarge"
TRACE = ROOT.parent / "shared" / "traces" / "philly.csv"
DRAIN_EXAMPLE = ROOT / "events" / "drain-node.json"
# Each GPU's share of a p3.16xlarge (64 vCPU, 488 GiB), leaving room for the node reserve.
CPU_PER_GPU = 7
MEMORY_GIB_PER_GPU = 50


# the Successful activities by which an instance joins a group: its own launch, or a gang fleet's attach
_JOINED_GROUP = ("Launching a new EC2 instance: ", "Attaching an existing EC2 instance: ")


@dataclass(frozen=True)
class DemoOptions:
    quick: bool = False
    chart: Path = Path("out/demo.png")
    trace: Path = TRACE
    # The burst: the first jobs of one virtual cluster from ``start`` (a real burst in the trace).
    virtual_cluster: str = "6214e9"
    start: str = "2017-10-04 04:04:00"
    window_seconds: int = 600
    jobs: int = 8
    time_scale: float = 36.0  # trace seconds per demo second
    boot_seconds: float = 1.0
    tick_seconds: float = 2.0
    timeout_seconds: float = 240.0  # every scene
    teams: bool = True  # scene 2, the shared cluster (spillway.local.demo_teams)
    night: bool = True  # scene 3, the night (spillway.local.demo_night)

    @classmethod
    def short(cls, chart: Path) -> DemoOptions:
        """The test's form: fewer jobs, faster time."""
        return cls(quick=True, chart=chart, jobs=4, time_scale=45.0, boot_seconds=0.5, timeout_seconds=170.0)

    def environment(self) -> dict[str, str]:
        """The functions' environment: short planner thresholds and short waits, nothing skipped (the rig
        adds ``KUBE_URL``)."""
        return {
            "CLUSTER_ACCESS": "url",
            "OBSERVE_WINDOW_SECONDS": "0",  # one observation per invocation: one per tick
            "HEARTBEAT_MINUTES": "0.01",  # a snapshot every tick, so idle time is seen to pass
            "SCALE_UP_POLL_SECONDS": "1",
            "LAUNCH_TIMEOUT_SECONDS": "20",
            "DRAIN_POLL_SECONDS": "1",
            # the default grace (30 s) plus the 60 s a plan leaves a drain before it evicts
            # (planner.disruption.GRACE_MARGIN_SECONDS): scene 3's consolidation moves its pods only so
            "DRAIN_DEADLINE_SECONDS": "90",
            "MAX_SNAPSHOT_AGE_SECONDS": "300",  # scene 3 moves the plan's clock up to ~2.5 min ahead
            "SCALE_DOWN_IDLE_MINUTES": "0.05",
            "SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES": "0",
            "MAX_SCALE_IN_FRACTION": "1.0",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "Spillway",
            "PLANNER_CONFIG": scene_tenants(),  # scene 2's tenant limits
            "GANG_DEADLINE_SECONDS": "20",
            "GANG_POLL_SECONDS": "1",
            "INTERRUPT_POLL_SECONDS": "1",  # scene 3's spot drain
        }


# --- the trace -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceJob:
    name: str
    submitted: datetime
    offset: float  # trace seconds since the burst's first submission
    duration: float  # trace seconds
    gpus: int


def load_burst(
    path: Path, virtual_cluster: str, start: str, window_seconds: int, limit: int
) -> list[TraceJob]:
    """The first ``limit`` jobs of ``virtual_cluster`` submitted in ``[start, start + window)``, of at most
    8 GPUs (one pod each), in submission order; read with :func:`spillway.sim.trace.read_trace`."""
    from spillway.sim.trace import read_trace

    if not path.exists():
        raise InputError("the Philly trace is not there (../shared/traces/philly.csv)", source=str(path))
    begin = datetime.strptime(start, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    end = begin + timedelta(seconds=window_seconds)
    rows = [
        r
        for r in read_trace(path, "philly").rows
        if r.namespace == f"vc-{virtual_cluster}" and begin <= r.submit < end and r.gpus <= 8
    ][:limit]
    if not rows:
        raise InputError(f"no jobs of {virtual_cluster} from {start}", source=str(path))
    first = rows[0].submit
    return [
        TraceJob(f"job-{i:02d}", r.submit.replace(tzinfo=None), (r.submit - first).total_seconds(),
                 float(r.duration), r.gpus)
        for i, r in enumerate(rows, 1)
    ]  # fmt: skip


def split_waves(jobs: list[TraceJob]) -> int:
    """Where the second wave starts: the burst's second half."""
    return (len(jobs) + 1) // 2


# --- the record ----------------------------------------------------------------------------------


@dataclass
class Job:
    trace: TraceJob
    wave: int
    arrive_at: float  # demo seconds, before any wave shift
    run_for: float  # demo seconds
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    node: str | None = None
    region: str | None = None
    starts: int = 0
    lost: bool = False

    @property
    def pod(self) -> str:
        return self.trace.name

    @property
    def gpus(self) -> int:
        return self.trace.gpus


@dataclass(frozen=True)
class Event:
    t: float
    kind: str
    text: str


@dataclass(frozen=True)
class Sample:
    t: float
    ready_nodes: dict[str, int]
    ready_gpus: dict[str, int]
    running_gpus: dict[str, int]
    pending_gpus: int


@dataclass
class DemoResult:
    events: list[Event] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    instances_seen: set[str] = field(default_factory=set)
    instances_running: set[str] = field(default_factory=set)
    instances_drained: set[str] = field(default_factory=set)
    evicted_job_pods: list[str] = field(default_factory=list)
    chart: Path | None = None
    log: Path | None = None
    elapsed: float = 0.0
    complete: bool = False
    scene: SceneResult | None = None
    night: NightResult | None = None

    def first(self, kind: str) -> float | None:
        return next((e.t for e in self.events if e.kind == kind), None)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


# --- the scheduler -------------------------------------------------------------------------------


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def schedule(kube: Any, now: str) -> list[tuple[str, str]]:
    """One pass of a first-fit scheduler: bind each unbound pending pod (oldest first) to the first Ready,
    schedulable node whose free room, labels and taints allow it, nodes with fewer PreferNoSchedule taints
    it does not tolerate first (TaintToleration's score), then by name; mark the others
    ``PodScheduled=False/Unschedulable`` with kube-scheduler's kind of message. Returns (pod, node)
    pairs bound, as ``namespace/name``."""
    nodes = _schedulable_nodes(kube)
    free: dict[str, Resources] = {n.name: dict(n.allocatable) for n in nodes}
    bound: list[tuple[str, str]] = []
    for raw, pod in _pending_pods(kube, free):
        reasons: dict[str, int] = {}
        preferred = sorted(
            nodes, key=lambda n: preferred_against(pod.tolerations, n.taints)
        )  # stable: by name
        node = _first_fit(pod, preferred, free, reasons)
        if node is not None:
            kube.bind(pod.name, node, pod.namespace)
            free[node] = subtract(free[node], pod.requests)
            bound.append((pod.key, node))
            continue
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        message = f"0/{len(nodes)} nodes are available" + (f": {detail}." if detail else ".")
        _mark_unschedulable(kube, raw, message, now)
    return bound


def _schedulable_nodes(kube: Any) -> list[NodeInfo]:
    nodes = [NodeInfo.from_node(Node.model_validate(raw)) for raw in kube.list("Node")]
    return sorted((n for n in nodes if n.ready and not n.unschedulable), key=lambda n: n.name)


def _pending_pods(kube: Any, free: dict[str, Resources]) -> list[tuple[dict[str, Any], PodInfo]]:
    """The unbound pending pods, oldest first, none being deleted; what bound pods take is subtracted
    from ``free``, a bound pod being deleted's too: kube-scheduler keeps such a pod on its node until
    it is gone (its cache drops a pod on the informer's delete only, pkg/scheduler/eventhandlers.go)."""
    pending: list[tuple[dict[str, Any], PodInfo]] = []
    for raw in kube.list("Pod"):
        pod_info = PodInfo.from_pod(Pod.model_validate(raw))
        if pod_info.terminal:
            continue
        if pod_info.node_name:
            if pod_info.node_name in free:
                free[pod_info.node_name] = subtract(free[pod_info.node_name], pod_info.requests)
        elif pod_info.phase == "Pending" and not pod_info.terminating:
            pending.append((raw, pod_info))
    pending.sort(key=lambda p: (p[0]["metadata"].get("creationTimestamp") or "", p[1].key))
    return pending


def _first_fit(
    pod: PodInfo, nodes: list[NodeInfo], free: dict[str, Resources], reasons: dict[str, int]
) -> str | None:
    """The first node the pod fits on; otherwise None, with why not counted in ``reasons``."""
    for node in nodes:
        why = why_not_placeable(
            pod.node_selector, pod.required_terms, pod.tolerations, node.labels, node.taints, node.name
        )
        if why is None and not fits(pod.requests, free[node.name]):
            short = [r for r, v in pod.requests.items() if v > free[node.name].get(r, 0)]
            why = f"Insufficient {short[0] if short else 'resources'}"
        if why is None:
            return node.name
        reasons[why] = reasons.get(why, 0) + 1
    return None


def _mark_unschedulable(kube: Any, pod: dict[str, Any], message: str, now: str) -> None:
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    if old is not None and old.get("reason") == "Unschedulable" and old.get("message") == message:
        return
    since = old.get("lastTransitionTime") if old and old.get("status") == "False" else now
    conditions.append(
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
         "lastTransitionTime": since}
    )  # fmt: skip
    status["conditions"] = conditions
    kube.update("Pod", pod)


# --- the run -------------------------------------------------------------------------------------


class Demo:
    """One run of the script (see the module docstring); :meth:`run` returns what happened."""

    def __init__(self, options: DemoOptions, out: IO[str]) -> None:
        self.options = options
        self.out = out
        self.result = DemoResult()
        self.t0 = time.monotonic()
        self.jobs: list[Job] = []
        self.cut = 0
        self.shift = 0.0  # how long the second wave waited for the outage
        self.outage_at: float | None = None
        self.first_wave_up = False
        self.executions: dict[str, str] = {}  # arn -> last status seen
        self.exec_kind: dict[str, str] = {}
        self.nodes_seen: dict[str, str] = {}  # node -> region, now
        self.node_regions: dict[str, str] = {}  # node -> region, ever
        self.activities_seen: set[str] = set()
        self.manual_arn: str | None = None
        self.manual_node: str | None = None
        self.notebooks = 0
        self.started = False
        self.scene: TeamsScene | None = TeamsScene(self) if options.teams else None
        self.result.scene = self.scene.result if self.scene else None
        self.night: NightScene | None = NightScene(self) if options.night else None
        self.result.night = self.night.result if self.night else None

    # -- output --

    def now(self) -> float:
        return time.monotonic() - self.t0

    def say(self, kind: str, text: str) -> None:
        t = self.now()
        self.result.events.append(Event(t, kind, text))
        self.out.write(f"{t:6.1f}s  {text}\n" if self.started else f"  setup  {text}\n")
        self.out.flush()

    # -- the script --

    def run(self) -> DemoResult:
        options = self.options
        trace = load_burst(
            options.trace, options.virtual_cluster, options.start, options.window_seconds, options.jobs
        )
        self.cut = split_waves(trace)
        scale = options.time_scale
        self.jobs = [
            Job(
                trace=tj,
                wave=1 if i < self.cut else 2,
                arrive_at=tj.offset / scale,
                run_for=tj.duration / scale,
            )
            for i, tj in enumerate(trace)
        ]
        self.result.jobs = self.jobs
        options.chart.parent.mkdir(parents=True, exist_ok=True)
        self.result.log = options.chart.with_suffix(".log")
        with self.result.log.open("w") as log, _functions_log_to(log):
            self._run_on_rig()
        self.result.elapsed = self.now()
        self.result.chart = write_chart(self.result, options.chart, self.outage_at)
        return self.result

    def _run_on_rig(self) -> None:
        rig = Rig(self.options.environment(), cluster=CLUSTER, regions=REGIONS,
                  boot_seconds=self.options.boot_seconds, tick=0.1, prefix="spillway-demo")  # fmt: skip
        with rig:
            try:
                self._script(rig)
            finally:
                if self.night is not None:
                    self.night.close()
        if rig.registrar.errors:
            self.say("error", f"kubelet stand-in errors: {rig.registrar.errors[:3]}")

    def _script(self, rig: Rig) -> None:
        self._setup(rig)
        self.t0 = time.monotonic()
        self.started = True
        self.say("setup", "clock starts: jobs arrive at their (scaled) submit times")
        deadline = time.monotonic() + self.options.timeout_seconds
        while time.monotonic() < deadline:
            t = self.now()
            if self._step(rig):
                self.result.complete = True
                break
            time.sleep(max(0.0, self.options.tick_seconds - (self.now() - t)))
        else:
            self.say("timeout", f"the script did not finish in {self.options.timeout_seconds:.0f} s")
        self._account(rig)
        self._summary()

    def _setup(self, rig: Rig) -> None:
        """The groups, the CPU nodes' notebooks, a warm-up tick."""
        options, kube = self.options, rig.kube
        gpus = sum(j.gpus for j in self.jobs)
        self.say(
            "setup",
            f"Spillway demo{' (quick)' if options.quick else ''}: template.yaml on moto, the Kubernetes API "
            f"emulator at {kube.url}; cluster {CLUSTER!r} in {HOME} (primary) and {WEST}",
        )
        self.out.write(
            f"        burst: {len(self.jobs)} jobs ({gpus} GPUs) of Philly virtual cluster "
            f"{options.virtual_cluster}, submitted from {self.jobs[0].trace.submitted} over "
            f"{self.jobs[-1].trace.offset:.0f} s; times divided by {options.time_scale:g}\n"
        )
        for region in REGIONS:
            suffix = "east" if region == HOME else "west"
            rig.group(f"cpu-{suffix}", region=region, instance_type=CPU_TYPE, desired=2 if region == HOME else 0,
                      gpu=False)  # fmt: skip
            rig.group(f"gpu-{suffix}", region=region, instance_type=GPU_TYPE, desired=0, gpu=True)
        self.say("setup", f"groups: cpu-east ({CPU_TYPE}, 2), gpu-east ({GPU_TYPE}, 0) in {HOME}; "
                          f"cpu-west, gpu-west (0) in {WEST}; GPU groups tainted nvidia.com/gpu")  # fmt: skip
        try:
            nodes = rig.wait_nodes(2, timeout=20)
        except TimeoutError as exc:
            raise TimeoutError(f"the CPU nodes never registered: {rig.registrar.errors}") from exc
        for node in sorted(nodes):
            self._notebook(kube, node)
        self._watch(rig)
        self._tick(rig)  # warm the functions up (first imports, clients): an idle plan
        self._executions(rig)

    def _step(self, rig: Rig) -> bool:
        """One tick of the script; True once the story is complete."""
        kube, t = rig.kube, self.now()
        self._watch(rig)
        self._scheduler(kube)
        self._completions(kube)
        if self._arrivals(kube, rig.sim, t):
            self._scheduler(kube)
        self._tick(rig)
        self._executions(rig)
        self._sample(kube)
        if self.result.first("done") is None and self._gpu_fleet_gone(kube):
            self.say("done", "every job finished and every GPU node is gone")
            self._manual_drain(rig)
        if self.manual_arn:
            self._replica_set(kube)
        if self.result.first("done") is None or not self.manual_arn:
            return False
        if self.executions.get(self.manual_arn) == "RUNNING":
            return False
        return self._scenes(rig)

    def _scenes(self, rig: Rig) -> bool:
        """Scenes 2 and 3, each started once the one before is over; True once the last is."""
        scenes: list[TeamsScene | NightScene] = [s for s in (self.scene, self.night) if s is not None]
        for scene in scenes:
            if not scene.started:
                self._scheduler(rig.kube)
                self._watch(rig)
                self._sample(rig.kube)
                scene.start(rig)
                return False
            if not scene.result.done:
                return scene.step(rig) and scene is scenes[-1]
        return True

    def _account(self, rig: Rig) -> None:
        """What is running now, and which job pods any eviction touched."""
        for instance, state in rig.instances().items():
            self.result.instances_seen.add(instance)
            if state == "InService":
                self.result.instances_running.add(instance)
        if self.scene is not None:
            self.scene.account(rig)
        if self.night is not None:
            self.night.account(rig)
        self.result.evicted_job_pods = sorted(
            {
                r.path.split("/")[-2]
                for r in rig.kube.requests
                if r.method == "POST"
                and r.path.endswith("/eviction")
                and f"/namespaces/{NAMESPACE}/" in r.path
            }
        )

    # -- each tick --

    def _arrivals(self, kube: Any, sim: Any, t: float) -> bool:
        """Submit the jobs whose time has come; True when any was."""
        arrived = False
        if not self.first_wave_up:
            wave1 = [j for j in self.jobs if j.wave == 1]
            self.first_wave_up = bool(wave1) and all(j.started_at is not None for j in wave1)
        for job in self.jobs:
            if job.submitted_at is not None:
                continue
            if job.wave == 2 and self.outage_at is None:
                # The second wave comes after the first one's nodes are up and the outage began.
                if not self.first_wave_up:
                    continue
                sim.capacity_outage("gpu-east", HOME)
                self.outage_at = t
                self.shift = max(0.0, t - self.jobs[self.cut].arrive_at)
                self.say(
                    "outage",
                    f"{HOME}: gpu-east runs out of {GPU_TYPE} capacity (InsufficientInstanceCapacity from "
                    f"now on); the second wave of the burst arrives",
                )
            at = job.arrive_at + (self.shift if job.wave == 2 else 0.0)
            if at > t:
                continue
            kube.add(
                o.pod(
                    job.pod,
                    NAMESPACE,
                    cpu=str(CPU_PER_GPU * job.gpus),
                    memory=f"{MEMORY_GIB_PER_GPU * job.gpus}Gi",
                    gpus=job.gpus,
                    tolerations=[GPU_TOLERATION],
                    owner=("Job", job.pod),
                    labels={"app": "train", "job-name": job.pod},
                    created=datetime.now(UTC),
                )
            )
            job.submitted_at = t
            arrived = True
            self.say(
                "arrive",
                f"{NAMESPACE}/{job.pod} submitted: {job.gpus} GPUs, {job.trace.duration:.0f} s in the trace "
                f"-> {job.run_for:.1f} s here (wave {job.wave})",
            )
        return arrived

    def _scheduler(self, kube: Any) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        by_pod = {f"{NAMESPACE}/{j.pod}": j for j in self.jobs}
        bound = schedule(kube, stamp)
        if any(node not in self.nodes_seen for _, node in bound):
            # a kubelet registered its Node after this tick's watch: say so first, with its region
            self._watch_nodes(kube)
        for pod, node in bound:
            region = self.nodes_seen.get(node, "?")
            job = by_pod.get(pod)
            if job is None:
                if self.scene is None or pod not in self.scene.pods:
                    self.say("bind", f"scheduler: {pod} -> {node} ({region})")
                continue
            job.starts += 1
            job.started_at, job.node, job.region = self.now(), node, region
            waited = job.started_at - (job.submitted_at or job.started_at)
            self.say("bind", f"scheduler: {pod} -> {node} ({region}); running after {waited:.1f} s pending")

    def _completions(self, kube: Any) -> None:
        for job in self.jobs:
            if job.started_at is None or job.finished_at is not None or job.lost:
                continue
            pod = kube.get("Pod", job.pod, NAMESPACE)
            if pod is None or (pod.get("spec") or {}).get("nodeName") != job.node:
                job.lost = True
                self.say("lost", f"{NAMESPACE}/{job.pod} disappeared while running on {job.node}")
                continue
            if self.now() - job.started_at < job.run_for:
                continue
            pod["status"]["phase"] = "Succeeded"
            pod["status"]["conditions"] = [
                {**c, "status": "False"} if c.get("type") in ("Ready", "ContainersReady") else c
                for c in pod["status"].get("conditions") or []
            ]
            kube.update("Pod", pod)
            kube.delete("Pod", job.pod, NAMESPACE)  # the Job's ttlSecondsAfterFinished: 0
            job.finished_at = self.now()
            self.say("finish", f"{NAMESPACE}/{job.pod} completed on {job.node} ({job.region})")

    def _watch(self, rig: Rig) -> None:
        """Print what AWS and the kubelets did: scaling activities, Nodes registering and going away."""
        self._watch_activities(rig.sim)
        self._watch_nodes(rig.kube)

    def _watch_activities(self, sim: Any) -> None:
        with sim._lock:
            activities = [(r, a) for (r, _), items in sim.activities.items() for a in items]
        for region, activity in sorted(activities, key=lambda ra: ra[1]["StartTime"]):
            if activity["ActivityId"] in self.activities_seen:
                continue
            self.activities_seen.add(activity["ActivityId"])
            group, status = activity["AutoScalingGroupName"], activity["StatusCode"]
            described = str(activity.get("Description", ""))
            if status == "Successful" and described.startswith(_JOINED_GROUP):
                self.result.instances_seen.add(described.rsplit(" ", 1)[-1])
            if status == "Failed":
                message = str(activity.get("StatusMessage", "")).split(". ")[0]
                self.say("aws", f"AWS {region} {group}: launch Failed: {message}")
            else:
                self.say("aws", f"AWS {region} {group}: {activity['Description']}")

    def _watch_nodes(self, kube: Any) -> None:
        current: dict[str, str] = {}
        for node in kube.list("Node"):
            labels = node["metadata"].get("labels") or {}
            current[node["metadata"]["name"]] = labels.get("topology.kubernetes.io/region", "?")
        self.node_regions.update(current)
        for name in sorted(set(current) - set(self.nodes_seen)):
            node = kube.get("Node", name) or {}
            gpus = (node.get("status") or {}).get("allocatable", {}).get(NVIDIA_GPU)
            itype = (node.get("metadata") or {}).get("labels", {}).get("node.kubernetes.io/instance-type")
            self.say(
                "node", f"node {name} Ready ({current[name]}, {itype}{f', {gpus} GPUs' if gpus else ''})"
            )
        for name in sorted(set(self.nodes_seen) - set(current)):
            self.say("node_gone", f"node {name} ({self.nodes_seen[name]}) deleted")
        self.nodes_seen = current

    def _tick(self, rig: Rig) -> None:
        """ObserveFunction once (the schedule's event), then PlanFunction on the new stream records."""
        result = rig.tick(_schedule_event())
        for outcome in (result or {}).get("results") or []:
            if outcome.get("status") == "acted":
                self._print_plan(rig, outcome)
            if outcome.get("status") in ("acted", "idle"):
                self._print_scene_plan(rig, outcome)
            elif outcome.get("status") in ("failed", "stale"):
                self.say(
                    "plan_error",
                    f"plan {outcome.get('status')}: {outcome.get('error') or outcome.get('note')}",
                )

    def _print_plan(self, rig: Rig, outcome: Mapping[str, Any]) -> None:
        from spillway.adapters.plans_store import PlanStore

        store = PlanStore(rig.stack.client("dynamodb"), rig.stack.tables["PlansTable"])
        record = store.get(CLUSTER, str(outcome["snapshot_key"]))
        if record is None:
            return
        plan = record.plan
        for s in plan.get("scale_up") or []:
            self.say("scale_up", f"plan: grow {s['group']} ({s['region']}) {s['from']} -> {s['to']} for "
                                 f"{len(s['pods'])} pod(s): {_short(s['reason'])}")  # fmt: skip
            if s["region"] != HOME:
                self.say("overflow", f"overflow: the plan sends {len(s['pods'])} pod(s) to {s['region']}, "
                                     "the primary region's GPU group being backed off")  # fmt: skip
        for u in plan.get("uncordon") or []:
            self.say("uncordon", f"plan: uncordon {u['node']} ({u['group']}): {u['reason']}")
        drains = plan.get("drain") or []
        if drains:
            order = ", ".join(f"{d['node']} ({_region_of(d['group'])})" for d in drains)
            self.say("drain_plan", f"plan: drain {len(drains)} node(s), in this order: {order}")
            for d in drains:
                self.say("drain_reason", f"      {d['node']}: {d['reason']}")
        for name in [e["name"] for e in outcome.get("executions") or []]:
            self.say("start", f"plan starts execution {name}")

    def _print_scene_plan(self, rig: Rig, outcome: Mapping[str, Any]) -> None:
        from spillway.adapters.plans_store import PlanStore

        scene = (
            self.scene
            if self.scene is not None and self.scene.started and not self.scene.result.done
            else None
        )
        night = (
            self.night
            if self.night is not None and self.night.started and not self.night.result.done
            else None
        )
        if scene is None and night is None:
            return
        store = PlanStore(rig.stack.client("dynamodb"), rig.stack.tables["PlansTable"])
        record = store.get(CLUSTER, str(outcome["snapshot_key"]))
        if record is not None and scene is not None:
            scene.print_held(dict(record.plan))
        if record is not None and night is not None:
            night.on_plan(dict(record.plan))

    def _executions(self, rig: Rig) -> None:
        sfn = rig.stack.client("stepfunctions")
        for logical, e in rig.all_executions():
            key = e["executionArn"]
            before = self.executions.get(key)
            self.executions[key] = e["status"]
            self.exec_kind[key] = logical
            if e["status"] == "RUNNING" or before == e["status"]:
                continue
            desc = sfn.describe_execution(executionArn=key)
            output = json.loads(desc["output"]) if desc.get("output") else {}
            self._print_execution(logical, e["name"], e["status"], output, desc)

    def _print_execution(
        self, logical: str, name: str, status: str, output: Mapping[str, Any], desc: Mapping[str, Any]
    ) -> None:
        if logical == "GangLaunchStateMachine" and self.scene is not None:
            self.scene.print_gang_execution(name, status, dict(desc))
            return
        if logical == "DrainNodeStateMachine" and name.startswith("interrupt-") and self.night is not None:
            self.night.print_interrupt_execution(name, status, dict(output))
            if output.get("outcome") == "terminated" and isinstance(output.get("instance_id"), str):
                self.result.instances_drained.add(str(output["instance_id"]))
            return
        if status != "SUCCEEDED":
            self.say("exec_failed", f"{name}: {status}: {desc.get('error')} {str(desc.get('cause'))[:200]}")
            return
        if logical == "ScaleUpStateMachine":
            self._print_scale_up(name, output)
        elif logical == "ScaleDownStateMachine":
            for d in output.get("drains") or []:
                self._print_drain(name, d)
            self.say("exec", f"{name} SUCCEEDED: {output.get('counts')}")
        elif logical == "DrainNodeStateMachine" and name.startswith("manual-"):
            self._print_drain(name, output)
            self.say("exec", f"{name} SUCCEEDED")

    def _print_scale_up(self, name: str, output: Mapping[str, Any]) -> None:
        rounds = output.get("rounds") or []
        for i, r in enumerate(rounds, 1):
            for g in r.get("groups") or []:
                self.say("scale_up_round", f"{name} round {i}: {g.get('group')} ({g.get('region')}) "
                                           f"{g.get('outcome')}: {_short(str(g.get('reason', '')))}")  # fmt: skip
                if i > 1 and g.get("region") != HOME and g.get("outcome") == "ready":
                    self.say("overflow", f"overflow: {g.get('group')} in {g.get('region')} took the rest "
                                         f"of the burst, within {name}")  # fmt: skip
        self.say("exec", f"{name} SUCCEEDED: {output.get('result', '')} after {len(rounds)} round(s)")

    def _print_drain(self, name: str, d: Mapping[str, Any]) -> None:
        node, outcome = str(d.get("node")), d.get("outcome")
        terminated = d.get("terminated") or {}
        instance = (terminated.get("instance_id") if isinstance(terminated, dict) else None) or d.get(
            "instance_id"
        )
        evicted = d.get("evicted")
        where = f"{node} ({self.node_regions.get(node, '?')})"
        if outcome == "cancelled" and "error" not in d:  # validation cancelled it, or work came since
            abandoned = f" after evicting {d['evicted_count']} pod(s)" if d.get("evicted_count") else ""
            self.say("drain_cancelled", f"{name}: {where}: cancelled{abandoned}: {str(d.get('note'))[:160]}")
            return
        if outcome not in ("terminated", "drained", "gone"):
            self.say(
                "drain_failed", f"{name}: {where}: {outcome}: {d.get('error')} {str(d.get('cause'))[:160]}"
            )
            return
        pods = f", {len(evicted)} pod(s) evicted" if isinstance(evicted, list) else ""
        if not pods and d.get("evicted_count"):
            pods = f", {d.get('evicted_count')} pod(s) evicted"
        if self.night is not None and self.night.started:
            self.night.on_drain_outcome(name, dict(d))
        self.say("drain", f"{name}: {where} cordoned and drained{pods}")
        if outcome == "terminated":
            if isinstance(instance, str):
                self.result.instances_drained.add(instance)
            deleted = ", Node deleted" if d.get("node_deleted") else ""
            self.say("terminate", f"{name}: {instance or '?'} terminated{deleted}")
        elif outcome == "gone":  # terminated by another (another drain of it counted it terminated)
            self.say("drain_gone", f"{name}: {instance or '?'} was already terminating, not by this drain")

    def _sample(self, kube: Any) -> None:
        ready_nodes, ready_gpus = _ready_gpu_capacity(kube)
        running = {r: 0 for r in REGIONS}
        pending = 0
        for job in self.jobs:
            if job.submitted_at is None or job.finished_at is not None or job.lost:
                continue
            if job.started_at is None:
                pending += job.gpus
            else:
                running[job.region or HOME] = running.get(job.region or HOME, 0) + job.gpus
        self.result.samples.append(Sample(self.now(), ready_nodes, ready_gpus, running, pending))

    def _gpu_fleet_gone(self, kube: Any) -> bool:
        if not all(j.finished_at is not None or j.lost for j in self.jobs):
            return False
        gpu_nodes = [
            n for n in kube.list("Node") if (n.get("status") or {}).get("allocatable", {}).get(NVIDIA_GPU)
        ]
        running = [a for a, s in self.executions.items() if s == "RUNNING"]
        return not gpu_nodes and not running and self.result.first("terminate") is not None

    def _manual_drain(self, rig: Rig) -> None:
        payload = json.loads(DRAIN_EXAMPLE.read_text())
        cpu_nodes = sorted(n["metadata"]["name"] for n in rig.kube.list("Node"))
        if not cpu_nodes:
            return
        node = cpu_nodes[0]
        payload.update(node=node, reason="manual: retire the node before the AMI rollout (demo)",
                       deadline_seconds=30, poll_seconds=1)  # fmt: skip
        self.manual_node = node
        self.manual_arn = rig.stack.start(
            "DrainNodeStateMachine", payload, name=f"manual-drain-{int(time.time())}"
        )
        self.executions[self.manual_arn] = "RUNNING"
        self.exec_kind[self.manual_arn] = "DrainNodeStateMachine"
        self.say("manual", f"operator: DrainNode execution for {node} (events/drain-node.json, deadline 30 s, "
                           "poll 1 s): cordon, evict (PDB-aware), terminate")  # fmt: skip

    def _notebook(self, kube: Any, node: str | None) -> None:
        """A long-running CPU pod (ReplicaSet-owned): keeps the CPU nodes busy, so only the operator
        drains them."""
        self.notebooks += 1
        kube.add(
            o.pod(
                f"notebook-{self.notebooks}",
                "research",
                cpu="1",
                memory="2Gi",
                node_name=node,
                owner=("ReplicaSet", "notebook-7f9c"),
                labels={"app": "notebook"},
                created=datetime.now(UTC),
            )
        )

    def _replica_set(self, kube: Any) -> None:
        """The notebooks' ReplicaSet controller: an evicted replica is replaced (pending, for the scheduler)."""
        live = [
            p for p in kube.list("Pod", "research") if not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        for _ in range(2 - len(live)):
            self._notebook(kube, None)
            self.say("replace", f"ReplicaSet notebook-7f9c: replacement research/notebook-{self.notebooks} "
                                "created (pending)")  # fmt: skip

    def _summary(self) -> None:
        done = [j for j in self.jobs if j.finished_at is not None]
        by_region: dict[str, int] = {}
        for j in done:
            by_region[j.region or "?"] = by_region.get(j.region or "?", 0) + 1
        waits = sorted((j.started_at or 0) - (j.submitted_at or 0) for j in done)
        self.out.write("\nsummary\n")
        self.out.write(
            f"  jobs completed: {len(done)} of {len(self.jobs)} "
            f"({', '.join(f'{n} in {r}' for r, n in sorted(by_region.items()))}); lost: "
            f"{sum(j.lost for j in self.jobs)}; job pods evicted: {len(self.result.evicted_job_pods)}\n"
        )
        if waits:
            self.out.write(f"  pending time: median {waits[len(waits) // 2]:.1f} s, max {waits[-1]:.1f} s\n")
        leaked = self.result.instances_seen - self.result.instances_running - self.result.instances_drained
        self.out.write(
            f"  instances: {len(self.result.instances_seen)} seen, {len(self.result.instances_running)} running "
            f"at the end, {len(self.result.instances_drained)} terminated by drains, "
            f"{len(leaked)} unaccounted for\n"
        )
        if self.scene is not None:
            self._scene_summary(self.scene.result)
        if self.night is not None:
            self._night_summary(self.night.result)

    def _scene_summary(self, scene: SceneResult) -> None:
        done = [p for p in scene.pods if p.finished_at is not None]
        gangs = ", ".join(f"{g} {o['status']}" for g, o in sorted(scene.gang_executions.items()))
        alive = set(scene.running_at_end) & scene.failed_gang_instances
        self.out.write(
            f"  scene 2: {len(done)} of {len(scene.pods)} team pods completed, "
            f"{sum(p.deleted for p in scene.pods)} deleted (the failed gang); held by tenant limits: "
            f"{len(scene.held)} ({', '.join(sorted(scene.held))}); "
            f"gang launches: {gangs or 'none'}; the failed gang's instances: "
            f"{len(scene.failed_gang_instances)} launched, {len(alive)} running at the end\n"
        )

    def _night_summary(self, night: NightResult) -> None:
        jobs = [p for p in night.pods if p.role != "crawler" and not p.evicted]  # evicted: the job shrank
        done = [p for p in jobs if p.finished_at is not None]
        fixed = [p for p in night.pods if not p.movable]
        evicted = sorted({pod for pod, status in night.evictions if status == 201})
        unmovable = sorted({p.key.split("/")[1] for p in fixed} & set(evicted))
        leaked = set(night.instances) - night.drained_instances
        self.out.write(
            f"  scene 3: {len(done)} of {len(jobs)} training, preprocessing and elastic pods completed (the "
            f"rest evicted by the consolidation); serving nodes drained at dusk: {len(night.serving_drains)}; consolidated: "
            f"{night.consolidation.get('node', 'none')} (elastic workers never below {night.min_workers_running}); "
            f"spot drain: {night.interrupt.get('outcome', 'none')} in {night.interrupt.get('took', 0):.1f} s; "
            f"pods evicted: {len(evicted)} ({len(unmovable)} not movable); instances: {len(night.instances)} "
            f"launched, {len(night.drained_instances & set(night.instances))} terminated by drains, "
            f"{len(leaked)} otherwise\n"
        )


# --- helpers -------------------------------------------------------------------------------------


def _ready_gpu_capacity(kube: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Ready, schedulable GPU nodes and their GPUs, per region."""
    ready_nodes = {r: 0 for r in REGIONS}
    ready_gpus = {r: 0 for r in REGIONS}
    for node in kube.list("Node"):
        region = (node["metadata"].get("labels") or {}).get("topology.kubernetes.io/region", HOME)
        gpus = int((node.get("status") or {}).get("allocatable", {}).get(NVIDIA_GPU, 0) or 0)
        if gpus and _ready(node) and not (node.get("spec") or {}).get("unschedulable"):
            ready_nodes[region] += 1
            ready_gpus[region] += gpus
    return ready_nodes, ready_gpus


def _region_of(group: str) -> str:
    return WEST if group.endswith("-west") else HOME


def _short(reason: str, limit: int = 150) -> str:
    """A reason on one line: EC2's long capacity message cut after its first sentence."""
    first = reason.replace("\n", " ")
    marker = " in the Availability Zone you requested"
    if marker in first:
        head, _, tail = first.partition(marker)
        zone_end = tail.find(").")
        first = head + marker + (tail[: zone_end + 2] if zone_end >= 0 else "")
        first = first.rstrip() + (" ..." if len(reason) > len(first) else "")
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _schedule_event() -> dict[str, Any]:
    path = ROOT / "events" / "schedule.json"
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    except (OSError, ValueError):
        return {"source": "aws.scheduler"}


@contextlib.contextmanager
def _functions_log_to(log: IO[str]) -> Iterator[None]:
    """The functions' Powertools logs and EMF metrics (stdout in Lambda) go to ``log``, not the timeline."""
    from spillway.observability import logger

    handler: Any = logger.registered_handler
    previous = _swap_stream(handler, log)
    # moto's interpreter logs failed states (a drain's compensation, say) as warnings: to the log too.
    root = logging.getLogger()
    to_log = logging.StreamHandler(log)
    root.addHandler(to_log)
    try:
        with contextlib.redirect_stdout(log), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            yield
    finally:
        root.removeHandler(to_log)
        if previous is not None:
            _swap_stream(handler, previous)


def _swap_stream(handler: Any, stream: IO[str]) -> Any:
    """Point a logging handler at ``stream``; returns the old one. setStream flushes the old stream
    first, which raises when someone (a test runner's capture) has closed it meanwhile."""
    if not hasattr(handler, "setStream"):
        return None
    try:
        return handler.setStream(stream)
    except ValueError:
        old = handler.stream
        handler.stream = stream
        return old


# --- the chart -----------------------------------------------------------------------------------


def _gpus_to_nodes(gpus: Any) -> Any:
    return gpus / 8


def _nodes_to_gpus(nodes: Any) -> Any:
    return nodes * 8


def write_chart(result: DemoResult, path: Path, outage_at: float | None) -> Path:
    """Capacity (Ready GPUs) against demand (GPUs of unfinished jobs) per region over time, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result.samples or [Sample(0.0, {}, {}, {}, 0)]
    t = [s.t for s in samples]
    fig, axes = plt.subplots(len(REGIONS) + 1, 1, figsize=(9, 7.5), sharex=True)
    total_cap = [sum(s.ready_gpus.values()) for s in samples]
    total_demand = [sum(s.running_gpus.values()) + s.pending_gpus for s in samples]
    axes[0].fill_between(t, total_cap, step="post", alpha=0.3, color="tab:blue", label="capacity: Ready GPUs")
    axes[0].step(t, total_demand, where="post", label="demand: GPUs of unfinished jobs", color="tab:red")
    axes[0].set_title("all regions")
    for ax, region in zip(axes[1:], REGIONS, strict=True):
        cap = [s.ready_gpus.get(region, 0) for s in samples]
        run = [s.running_gpus.get(region, 0) for s in samples]
        ax.fill_between(t, cap, step="post", alpha=0.3, color="tab:blue", label="capacity: Ready GPUs")
        ax.step(t, run, where="post", label="demand: GPUs of jobs running here", color="tab:red")
        nodes_axis = ax.secondary_yaxis("right", functions=(_gpus_to_nodes, _nodes_to_gpus))
        nodes_axis.set_ylabel("Ready GPU nodes")
        ax.set_title(f"{region}{' (primary)' if region == HOME else ' (overflow)'}")
    for ax in axes:
        ax.set_ylabel("GPUs")
        ax.set_ylim(0, max(8, max(total_cap + total_demand) + 8))
        if outage_at is not None:
            ax.axvline(outage_at, color="tab:orange", linestyle="--", label=f"{HOME} GPU outage")
        ax.legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("seconds since the burst began")
    fig.suptitle("spillway demo: capacity against demand")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run_demo(options: DemoOptions, out: IO[str] | None = None) -> DemoResult:
    return Demo(options, out or sys.stdout).run()


__all__ = ["DemoOptions", "DemoResult", "load_burst", "run_demo", "schedule"]
