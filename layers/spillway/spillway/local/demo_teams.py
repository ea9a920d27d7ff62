"""``spillway demo``'s second scene: the shared cluster. Two teams burst at once, one hits its limit, a
gang is launched atomically, and a second gang's atomic launch fails and leaves nothing behind.

It runs on the same :class:`~spillway.local.rig.Rig` as the first scene, after it, driven by
:class:`spillway.local.demo.Demo`'s ticks (observe, plan, the scheduler, the executions):

1. two GPU groups appear in us-east-1: ``gpu-teams`` (g5.xlarge, one GPU) and ``gpu-gang`` (g5.12xlarge,
   four GPUs, tagged ``spillway.io/atomic-launch: fleet``); Namespaces ``team-a`` and ``team-b`` carry
   ``spillway.io/tenant``; the tenant limits come from the planner configuration the functions receive
   (``PLANNER_CONFIG``: team-a may add 24 GPUs, team-b 2);
2. both teams submit at once: team-a three 1-GPU pods and a gang of three 4-GPU workers (Kueue pod-group
   labels, one node each), team-b four 1-GPU pods. team-b's two pods over its limit stay pending: the
   plan names the limit, and the plan function posts ``NotTriggerScaleUp`` on them (read back here from
   the API); they run later, on nodes freed when the first pods finish (the limit bounds what is
   added, not what runs);
3. the plan starts a GangLaunch execution for the gang: one instant CreateFleet of all three instances,
   attached to the group together; the three workers run together;
4. a second gang (two workers) arrives while EC2 can deliver only one instance of it (CloudSim's partial
   fleet): the GangLaunch execution terminates what was launched and backs the group off; its pods wait,
   ``backed-off``, and its owner deletes them. Nothing of it is left running;
5. the nodes go idle and the scale-down execution drains them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from spillway.local import objects as o
from spillway.local.rig import GPU_TOLERATION, HOME, create_group

if TYPE_CHECKING:
    from spillway.local.demo import Demo
    from spillway.local.rig import Rig

TENANT_LABEL = "spillway.io/tenant"
ATOMIC_TAG = "spillway.io/atomic-launch"
TEAM_TYPE = "g5.xlarge"  # 1 A10G
GANG_TYPE = "g5.12xlarge"  # 4 A10G
TEAM_GROUP = "gpu-teams"
GANG_GROUP = "gpu-gang"
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# What the planner configuration gives each team (PLANNER_CONFIG, README "Tenants, limits and gangs").
TENANTS = {"team-a": {"limits": {"nvidia.com/gpu": "24"}}, "team-b": {"limits": {"nvidia.com/gpu": "2"}}}
GANG_OK = "train-llm"
GANG_FAIL = "train-vision"


@dataclass
class ScenePod:
    namespace: str
    name: str
    gpus: int
    run_for: float
    gang: str | None = None
    gang_size: int = 0
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    node: str | None = None
    deleted: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class SceneResult:
    """What the scene saw, for the test: pods, held pods and their reasons, the Events, the gangs."""

    pods: list[ScenePod] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)  # pod -> the plan's tenant-limit reason
    gang_waits: dict[str, str] = field(default_factory=dict)  # code -> the failed gang's pending reason
    events: dict[str, str] = field(default_factory=dict)  # pod -> NotTriggerScaleUp message
    gang_executions: dict[str, dict[str, Any]] = field(default_factory=dict)  # gang -> outcome
    gang_nodes_ready: dict[str, list[float]] = field(default_factory=dict)  # group -> when each Node came
    failed_gang_instances: set[str] = field(default_factory=set)
    running_at_end: dict[str, dict[str, str]] = field(default_factory=dict)  # EC2: instance -> tags
    done: bool = False


def scene_tenants() -> str:
    """The ``PLANNER_CONFIG`` of the demo: the teams' limits."""
    return json.dumps({"tenants": TENANTS}, separators=(",", ":"))


class TeamsScene:
    """The second scene (see the module docstring), stepped by the demo's loop."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.result = SceneResult()
        self.started = False
        self.second_gang_at: float | None = None
        self.failed_gang_gone = False
        self.pods: dict[str, ScenePod] = {}
        self.gang_nodes_seen: dict[str, float] = {}

    def say(self, kind: str, text: str) -> None:
        self.demo.say(kind, text)

    # -- setup --

    def start(self, rig: Rig) -> None:
        self.started = True
        limits = ", ".join(
            f"{team} may add {spec['limits']['nvidia.com/gpu']} GPUs" for team, spec in TENANTS.items()
        )
        self.say("scene", f"scene 2, the shared cluster: two teams burst at once; PLANNER_CONFIG: {limits}")
        for team in TENANTS:
            rig.kube.add(
                {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": team, "labels": {TENANT_LABEL: team}}}
            )  # fmt: skip
        create_group(
            TEAM_GROUP, region=HOME, instance_type=TEAM_TYPE, max_size=8, cluster=rig.cluster, gpu=True
        )
        create_group(GANG_GROUP, region=HOME, instance_type=GANG_TYPE, max_size=8, cluster=rig.cluster, gpu=True,
                     tags={ATOMIC_TAG: "fleet"})  # fmt: skip
        self.say("setup", f"groups: {TEAM_GROUP} ({TEAM_TYPE}, 1 GPU) and {GANG_GROUP} ({GANG_TYPE}, 4 GPUs, "
                          f"tagged {ATOMIC_TAG}: fleet) in {HOME}, both empty")  # fmt: skip
        now = self.demo.now()
        batch = [ScenePod("team-a", f"a-{i}", 1, 5.0) for i in range(3)]
        batch += [ScenePod("team-b", f"b-{i}", 1, 4.0) for i in range(4)]
        batch += [ScenePod("team-a", f"{GANG_OK}-{i}", 4, 5.0, gang=GANG_OK, gang_size=3) for i in range(3)]
        for pod in batch:
            self._submit(rig, pod, now)
        self.say("arrive", "team-a submits 3 one-GPU pods and gang team-a/train-llm (3 workers x 4 GPUs, "
                           "Kueue pod-group labels); team-b submits 4 one-GPU pods, all at once")  # fmt: skip

    def _submit(self, rig: Rig, pod: ScenePod, now: float) -> None:
        labels = {"app": pod.name.rsplit("-", 1)[0]}
        annotations = None
        if pod.gang:  # Kueue's plain-pod groups: the group's name and its whole size on every pod
            labels[KUEUE_GROUP] = pod.gang
            annotations = {KUEUE_TOTAL: str(pod.gang_size)}
        itype = GANG_TYPE if pod.gang else TEAM_TYPE
        rig.kube.add(
            o.pod(pod.name, pod.namespace, cpu=str(10 * pod.gpus if pod.gang else 3),
                  memory=f"{40 * pod.gpus if pod.gang else 12}Gi", gpus=pod.gpus, tolerations=[GPU_TOLERATION],
                  node_selector={INSTANCE_TYPE_LABEL: itype}, owner=("Job", pod.gang or pod.name),
                  labels=labels, annotations=annotations, created=datetime.now(UTC))
        )  # fmt: skip
        pod.submitted_at = now
        self.pods[pod.key] = pod
        self.result.pods.append(pod)

    # -- each tick --

    def step(self, rig: Rig) -> bool:
        """One tick; True once the scene is over."""
        self._bound(rig)
        self._complete(rig)
        self._pod_events(rig)
        self._second_gang(rig)
        self._delete_failed_gang(rig)
        self._gang_nodes(rig)
        if not self.failed_gang_gone or any(
            p.finished_at is None and not p.deleted for p in self.pods.values()
        ):
            return False
        gpu_nodes = [n for n in rig.kube.list("Node")
                     if (n["metadata"].get("labels") or {}).get(INSTANCE_TYPE_LABEL) in (TEAM_TYPE, GANG_TYPE)]  # fmt: skip
        running = [a for a, s in self.demo.executions.items() if s == "RUNNING"]
        if gpu_nodes or running:
            return False
        self.say("scene_done", "scene 2: every team pod and the gang finished; the failed gang left nothing; "
                         "every GPU node drained")  # fmt: skip
        self.result.done = True
        return True

    def _bound(self, rig: Rig) -> None:
        now = self.demo.now()
        for pod in self.pods.values():
            if pod.started_at is not None or pod.deleted:
                continue
            raw = rig.kube.get("Pod", pod.name, pod.namespace)
            node = (raw or {}).get("spec", {}).get("nodeName")
            if node:
                pod.started_at, pod.node = now, node
                waited = now - (pod.submitted_at or now)
                self.say(
                    "scene_bind", f"scheduler: {pod.key} -> {node}; running after {waited:.1f} s pending"
                )
        gang = [p for p in self.pods.values() if p.gang == GANG_OK]
        if (
            gang
            and all(p.started_at is not None for p in gang)
            and "gang_runs" not in self.demo.result.kinds()
        ):
            nodes = sorted({p.node for p in gang if p.node})
            self.say("gang_runs", f"gang team-a/{GANG_OK}: all {len(gang)} workers running together, one node "
                                  f"each ({', '.join(nodes)})")  # fmt: skip

    def _complete(self, rig: Rig) -> None:
        now = self.demo.now()
        for pod in self.pods.values():
            if pod.started_at is None or pod.finished_at is not None or pod.deleted:
                continue
            if now - pod.started_at < pod.run_for:
                continue
            rig.kube.delete("Pod", pod.name, pod.namespace)  # Succeeded; the Job's TTL deletes it
            pod.finished_at = now
            self.say("scene_finish", f"{pod.key} completed on {pod.node}")

    def _pod_events(self, rig: Rig) -> None:
        """``NotTriggerScaleUp`` Events the plan function posted on held pods, as kubectl describe shows."""
        for event in rig.kube.list("Event", "team-b"):
            involved = event.get("involvedObject") or {}
            key = f"team-b/{involved.get('name')}"
            if event.get("reason") != "NotTriggerScaleUp" or key in self.result.events:
                continue
            self.result.events[key] = str(event.get("message"))
            self.say("pod_event", f"Event on {key}: NotTriggerScaleUp: {event.get('message')}")

    def _second_gang(self, rig: Rig) -> None:
        if self.second_gang_at is not None or "gang_runs" not in self.demo.result.kinds():
            return
        rig.sim.fleet_shortfall(HOME, launched=1)
        self.second_gang_at = self.demo.now()
        self.say("shortfall", f"{HOME}: EC2 can now deliver only 1 {GANG_TYPE} per instant fleet (CloudSim: a "
                              "partial fleet, InsufficientInstanceCapacity for the rest)")  # fmt: skip
        for i in range(2):
            self._submit(
                rig,
                ScenePod("team-a", f"{GANG_FAIL}-{i}", 4, 5.0, gang=GANG_FAIL, gang_size=2),
                self.demo.now(),
            )
        self.say("arrive", f"team-a submits gang team-a/{GANG_FAIL} (2 workers x 4 GPUs)")

    def _delete_failed_gang(self, rig: Rig) -> None:
        outcome = self.result.gang_executions.get(f"team-a/{GANG_FAIL}")
        if self.failed_gang_gone or outcome is None or _launched(outcome):
            return
        self.result.failed_gang_instances |= _gang_instances(f"team-a/{GANG_FAIL}")
        for pod in (p for p in self.pods.values() if p.gang == GANG_FAIL):
            rig.kube.delete("Pod", pod.name, pod.namespace)
            pod.deleted = True
        self.failed_gang_gone = True
        self.say("gang_cancel", f"team-a deletes gang {GANG_FAIL}'s pods (its group is backed off); EC2 shows "
                                f"{len(self.result.failed_gang_instances)} instance(s) of the attempt, none "
                                "running")  # fmt: skip

    def _gang_nodes(self, rig: Rig) -> None:
        """When each node of the gang group registered (Ready), for "all came up together"."""
        for node in rig.kube.list("Node"):
            name = node["metadata"]["name"]
            if (node["metadata"].get("labels") or {}).get(INSTANCE_TYPE_LABEL) == GANG_TYPE:
                self.gang_nodes_seen.setdefault(name, self.demo.now())
        self.result.gang_nodes_ready[GANG_GROUP] = sorted(self.gang_nodes_seen.values())

    # -- executions --

    def print_gang_execution(self, name: str, status: str, desc: dict[str, Any]) -> None:
        payload = json.loads(desc.get("input") or "{}")
        gang = str(payload.get("gang"))
        output = json.loads(desc["output"]) if desc.get("output") else {}
        # a shortage ends the execution successfully, given back: its error and cause are in its output
        error, cause = desc.get("error") or output.get("error"), desc.get("cause") or output.get("cause")
        self.result.gang_executions[gang] = {"name": name, "status": status, "output": output,
                                             "error": error, "cause": cause}  # fmt: skip
        if _launched(self.result.gang_executions[gang]):
            self.say("gang_launched", f"{name}: gang {gang}: {len(output.get('instances') or [])} instances from one "
                                      f"instant CreateFleet ({payload.get('mode')}), attached to "
                                      f"{payload.get('group')} together; {len(output.get('nodes') or [])} "
                                      "nodes Ready")  # fmt: skip
            return
        given_back = " given back," if output.get("outcome") == "given_back" else ""
        said = str(cause or "").replace("\n", " ")
        self.say("gang_failed", f"{name}: gang {gang}: {status}{given_back} {error}: {said[:220]}")
        self.say("gang_rollback", f"      every instance of the attempt terminated, {payload.get('group')} backed "
                                  "off; nothing of the gang is left running")  # fmt: skip

    def print_held(self, plan: dict[str, Any]) -> None:
        for entry in plan.get("pending") or []:
            pod, code = str(entry.get("pod")), entry.get("code")
            if code == "tenant-limit" and pod not in self.result.held:
                self.result.held[pod] = str(entry.get("reason"))
                self.say("held", f"plan: {pod} stays pending ({code}): {entry.get('reason')}")
            elif pod.startswith(f"team-a/{GANG_FAIL}-"):  # every code it waits with, to tell a miss apart
                self._gang_wait(str(code), str(entry.get("reason")))

    def _gang_wait(self, code: str, reason: str) -> None:
        if code not in self.result.gang_waits:
            self.result.gang_waits[code] = reason
            self.say("gang_wait", f"plan: gang team-a/{GANG_FAIL} pending ({code}): {reason[:200]}")

    def account(self, rig: Rig) -> None:
        """EC2's view at the end: every pending or running instance, with its tags."""
        import boto3

        for region in rig.regions:
            ec2 = boto3.client("ec2", region_name=region)
            for reservation in ec2.describe_instances(
                Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
            )["Reservations"]:
                for instance in reservation["Instances"]:
                    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                    self.result.running_at_end[instance["InstanceId"]] = tags


def _launched(outcome: dict[str, Any]) -> bool:
    """A gang-launch execution that launched its gang (not one that gave it back for a shortage)."""
    return bool(
        outcome["status"] == "SUCCEEDED" and (outcome.get("output") or {}).get("outcome") != "given_back"
    )


def _gang_instances(gang: str) -> set[str]:
    """Every instance EC2 ever launched for ``gang`` (tagged ``spillway.io/gang`` at launch), any state."""
    import boto3

    from spillway.model.fleet import TAG_GANG

    ec2 = boto3.client("ec2", region_name=HOME)
    found: set[str] = set()
    for reservation in ec2.describe_instances(Filters=[{"Name": f"tag:{TAG_GANG}", "Values": [gang]}])[
        "Reservations"
    ]:
        found |= {instance["InstanceId"] for instance in reservation["Instances"]}
    return found
