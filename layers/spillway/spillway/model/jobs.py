"""Jobs whose pods the autoscaler may move, distilled: which job a pod works for, and what the job says.

A pod names its job by the labels its controller sets (first match wins):

- ``training.kubeflow.org/job-name`` (Kubeflow training operator v1; the kind is the controller owner's,
  or read from ``training.kubeflow.org/operator-name``), role ``training.kubeflow.org/replica-type``;
- ``jobset.sigs.k8s.io/jobset-name`` (JobSet, and so Kubeflow Trainer v2's TrainJob, whose JobSet has
  the TrainJob's name);
- ``volcano.sh/job-name`` (Volcano ``Job``, label or annotation);
- ``batch.kubernetes.io/job-name`` (a ``batch/v1`` Job; kept apart too, for its ``podFailurePolicy``).

A job key is ``"<Kind>/<namespace>/<name>"``. A pod without such a label still belongs to its
controller (``"<owner kind>/<namespace>/<owner name>"``, see :func:`job_key`).

An elastic job's size range is what its launcher runs with, read as torchrun reads it: ``--nnodes`` in
the container's command or args first, then the job's own range (PyTorchJob ``spec.elasticPolicy``),
then the env ``PET_NNODES``. torchrun's flags take their default from the ``PET_`` variable of the same
name, and a flag on the command line wins (pytorch/pytorch torch/distributed/argparse_util.py, class
``env``); the Kubeflow training operator passes an elastic PyTorchJob's range to its pods only as
``PET_NNODES=MIN:MAX``, so a worker that runs ``torchrun --nnodes=4`` runs 4 nodes, fixed, whatever its
job's ``elasticPolicy`` says. A flag's value may name variables (``$(VAR)``, as the kubelet expands
command and args; ``$VAR`` or ``${VAR}`` in a shell's string): they are read from the container's env,
where the last definition of a name is the one it runs with (kubernetes/kubernetes
pkg/kubelet/kubelet_pods.go, ``makeEnvironmentVariables``), its own ``$(VAR)`` references expanded too.
A count that cannot be read so (an unset variable, one set by ``valueFrom``) is no range: the pod is not
elastic.

Kubeflow Trainer v2 does not make a TrainJob elastic: its runtime API has
``mlPolicy.torch.elasticPolicy`` (minNodes/maxNodes), but its torch plugin leaves it unused (left for
when JobSet supports elastic jobs) and sets ``PET_NNODES`` to the fixed node count
(kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go, ``EnforceMLPolicy``); its validation
refuses ``PET_NNODES`` in a TrainJob's own env (``TorchRunReservedEnvNames``). Only a command that runs
``torchrun --nnodes=MIN:MAX`` itself makes a TrainJob's pods elastic, and they are pods of the JobSet's
batch/v1 Jobs, which move only when their Job tolerates disruption (spillway.planner.disruption).

The worker that hosts the job's c10d rendezvous is a fixed role too (``PodJobFacts.rdzv_host``): the
agent whose host name matches the rendezvous endpoint's host runs the TCPStore every other agent talks
to (pytorch/pytorch torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py,
``_create_tcp_store``), so evicting it stops the whole job until it is back. The endpoint is read as
torchrun reads it (``--rdzv-endpoint``/``--rdzv_endpoint``, else ``PET_RDZV_ENDPOINT``); the training
operator points it at ``<job>-worker-0`` when ``elasticPolicy.rdzvHost`` is unset
(kubeflow/training-operator pkg/controller.v1/pytorch/elastic.go, ``generateEnvRDZVEndpoint``).

A node leaves a torchrun job on several nodes, elastic or not, safely only while torchrun may restart
the workers it leaves (``PodJobFacts.no_restarts``): ``--max-restarts``, else ``PET_MAX_RESTARTS``, read
from the container that says the node count, 0 (torchrun's default) when neither says (pytorch/pytorch
torch/distributed/run.py). The others' workers fail when a node goes, and an agent with no restart left
stops and closes the rendezvous, so the whole job ends (torch/distributed/elastic/__init__.py, "Scale
down event"; run.py, "Failure Modes"). Kubeflow Trainer's torch plugin sets no ``PET_MAX_RESTARTS``.

A PaddleJob's ``elasticPolicy`` makes nothing elastic: the training operator defaults it and uses it for
nothing else. Its Paddle controller gives every pod ``PADDLE_NNODES`` = the job's total replicas and
``PADDLE_MASTER`` = worker 0's (or the Master's) address (pkg/controller.v1/paddlepaddle/envvar.go,
``setPodEnv``), and runs no HPA; Paddle's launcher sets its arguments from those variables over its
command line (PaddlePaddle/Paddle python/paddle/distributed/launch/context/__init__.py,
``set_env_in_args``), and runs elastic only with an ``etcd://`` master (launch/controllers/collective.py,
``CollectiveElasticController.enable``). The operator's elastic PaddleJob was proposed and left unmerged
(kubeflow/trainer#1791, "depends on an external etcd service").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spillway.model.k8s import (
    KUBEFLOW_GROUP,
    BatchJob,
    Container,
    ElasticPolicy,
    JAXJob,
    KubeObject,
    MPIJob,
    PaddleJob,
    Pod,
    PodConditionPattern,
    PodFailurePolicyRule,
    PyTorchJob,
    ReplicaSpec,
    TFJob,
    VolcanoJob,
    VolcanoLifecyclePolicy,
    XGBoostJob,
    api_group,
)

DO_NOT_DRAIN = "openai/do-not-drain"  # kubernetes-ec2-autoscaler's label (annotation accepted too)
VOLCANO_PREEMPTABLE = "volcano.sh/preemptable"  # annotation, else label; Go's ParseBool true
KUBEFLOW_JOB_NAME = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
KUBEFLOW_OPERATOR = "training.kubeflow.org/operator-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
VOLCANO_JOB_NAME = "volcano.sh/job-name"
BATCH_JOB_NAME = "batch.kubernetes.io/job-name"
# the finalizer the job controller puts on each pod it makes and removes once it has counted the pod
# finished (pkg/controller/job/job_controller.go, removeTrackingFinalizerFromPods)
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
PET_NNODES = "PET_NNODES"
PET_RDZV_ENDPOINT = "PET_RDZV_ENDPOINT"
PET_MAX_RESTARTS = "PET_MAX_RESTARTS"
PADDLE_NNODES = "PADDLE_NNODES"
PADDLE_MASTER = "PADDLE_MASTER"
DISRUPTION_TARGET = "DisruptionTarget"  # the pod condition an eviction (or preemption) sets

# training.kubeflow.org/operator-name → kind, for a pod whose controller owner is not the job itself
_OPERATOR_KINDS = {
    "pytorchjob-controller": "PyTorchJob",
    "paddlejob-controller": "PaddleJob",
    "tfjob-controller": "TFJob",
    "mpijob-controller": "MPIJob",
    "mpi-operator": "MPIJob",  # kubeflow/mpi-operator v2beta1: its launcher pod is its launcher Job's
    "xgboostjob-controller": "XGBoostJob",
    "jaxjob-controller": "JAXJob",
}
# torchrun's flags as they appear in a command line (a shell's -c string included, where the value
# may be quoted); the value is checked by the reader
_NNODES_FLAG = re.compile(r"--nnodes(?:=|\s+)['\"]?([^\s'\"]+)")
_RDZV_ENDPOINT_FLAG = re.compile(r"--rdzv[-_]endpoint(?:=|\s+)['\"]?([^\s'\"]+)")
_MAX_RESTARTS_FLAG = re.compile(r"--max[-_]restarts(?:=|\s+)['\"]?([^\s'\"]+)")
# Paddle's launcher (python -m paddle.distributed.launch) and the two of its settings that make it elastic
_PADDLE_LAUNCH = re.compile(r"paddle\.distributed\.launch\b")
_MASTER_FLAG = re.compile(r"--master(?:=|\s+)['\"]?([^\s'\"]+)")
# a variable reference in a flag's value: the kubelet's $(VAR) in command and args, a shell's ${VAR}, $VAR
_VARIABLE = re.compile(r"\$(?:\(([^)]+)\)|\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def job_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """What a job object says about moving its pods.

    ``elastic_min``/``elastic_max``: its workers may run anywhere in that range (both 0: not elastic);
    ``tolerates_disruption``: a ``batch/v1`` Job whose ``podFailurePolicy`` ignores ``DisruptionTarget``
    before any rule that would fail the Job or count an evicted pod (an evicted pod is replaced without
    counting against ``backoffLimit``);
    ``active_deadline``/``started_at``: a running ``batch/v1`` Job's ``spec.activeDeadlineSeconds`` and
    ``status.startTime``: the controller terminates its pods that many seconds after it started;
    ``eviction_actions``: a Volcano Job's action on an evicted pod, by the pod's task (``""``: a task the
    Job does not name), when one of them takes more than that pod (:func:`_volcano_eviction_actions`);
    ``fail_roles``: a Kubeflow job's replica types (lower case) the training operator fails the whole
    job on when one of their pods fails, an evicted one included: a PyTorchJob's whose
    ``restartPolicy`` is ``Never`` (:func:`_never_restarting_roles`), and by each kind's rule a
    PaddleJob's, TFJob's, XGBoostJob's or JAXJob's (:func:`_failing_roles`);
    ``evictions_left``: a running ``batch/v1`` Job that counts an evicted pod as failed: how many more
    failed pods it survives (``spec.backoffLimit`` less ``status.failed`` and the failed pods not yet
    counted: in ``uncountedTerminatedPods``, or Failed with the tracking finalizer still on, which observe
    takes off, :class:`spillway.model.cluster.UncountedFailures`), None for any other job; ``eviction_fails``: the ``podFailurePolicy`` action (FailJob,
    FailIndex) that an eviction may match first, which fails the Job (or its index) at once
    (:func:`_counted_evictions`); ``per_index_limit``: such a Job's ``spec.backoffLimitPerIndex``: a pod
    whose index failed that many times already (``PodInfo.index_failures``) fails its index when
    evicted (kubernetes pkg/controller/job/indexed_job_utils.go, ``isIndexFailed``); ``finished``: an
    MPIJob that finished (its pods are told by the pods alone, :func:`job_of`).
    """

    key: str
    elastic_min: int = 0
    elastic_max: int = 0
    tolerates_disruption: bool = False
    active_deadline: int | None = None
    started_at: datetime | None = None
    eviction_actions: Mapping[str, str] = field(default_factory=dict)
    fail_roles: frozenset[str] = frozenset()
    evictions_left: int | None = None
    eviction_fails: str = ""
    per_index_limit: int | None = None
    finished: bool = False
    # the uids in a counting Job's status.uncountedTerminatedPods.failed: its failed pods already in
    # evictions_left, for observe's UncountedFailures to take no pod off twice; not stored
    uncounted_failed: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # what decides whether the controller counts a counting Job's failed pod (:func:`counts_failure`):
    # its podFailurePolicy rules, and an Indexed Job's spec.completions; not stored
    failure_rules: tuple[PodFailurePolicyRule, ...] = field(default=(), compare=False, repr=False)
    indexed_completions: int | None = field(default=None, compare=False, repr=False)

    def eviction_action(self, task: str | None) -> str:
        """What the job's controller does when a pod of ``task`` is evicted (``SyncJob`` when not known)."""
        actions = self.eviction_actions
        return actions.get(task or "", actions.get("", VOLCANO_SYNC_JOB))

    @property
    def elastic(self) -> bool:
        return self.elastic_max > self.elastic_min

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k": self.key}
        if self.elastic_max:
            out["mn"], out["mx"] = self.elastic_min, self.elastic_max
        if self.tolerates_disruption:
            out["td"] = 1
        if self.active_deadline is not None and self.started_at is not None:
            out["ad"] = self.active_deadline
            out["st"] = self.started_at.isoformat().replace("+00:00", "Z")
        if self.eviction_actions:
            out["ev"] = dict(self.eviction_actions)
        if self.fail_roles:
            out["fr"] = sorted(self.fail_roles)
        if self.evictions_left is not None:
            out["bl"] = self.evictions_left
        if self.eviction_fails:
            out["ef"] = self.eviction_fails
        if self.per_index_limit is not None:
            out["bpi"] = self.per_index_limit
        if self.finished:
            out["fin"] = 1
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JobInfo:
        return cls(
            key=d["k"],
            elastic_min=int(d.get("mn", 0)),
            elastic_max=int(d.get("mx", 0)),
            tolerates_disruption=bool(d.get("td")),
            active_deadline=int(d["ad"]) if "ad" in d else None,
            started_at=datetime.fromisoformat(d["st"].replace("Z", "+00:00")) if "st" in d else None,
            eviction_actions={str(k): str(v) for k, v in d.get("ev", {}).items()},
            fail_roles=frozenset(str(r) for r in d.get("fr", ())),
            evictions_left=int(d["bl"]) if "bl" in d else None,
            eviction_fails=str(d.get("ef", "")),
            per_index_limit=int(d["bpi"]) if "bpi" in d else None,
            finished=bool(d.get("fin")),
        )


def job_of(obj: KubeObject) -> JobInfo | None:
    """The JobInfo of a PyTorchJob, PaddleJob, TFJob, XGBoostJob, JAXJob, MPIJob, batch/v1 Job or Volcano Job;
    None for any other object, and for a job that says nothing about moving its pods (a PaddleJob's
    ``elasticPolicy`` reaches none of its pods, see the module docstring: of it, as of a TFJob, an
    XGBoostJob or a JAXJob, only the replica types whose evicted pod fails the job are kept,
    :func:`_failing_roles`). A Kubeflow job that finished (a Succeeded or Failed condition True) fails on
    none: the training operator's ``ReconcileJobs`` (pkg/controller.v1/common/job.go) returns for it
    before it counts pods or updates the job's conditions, and every kind's default
    ``runPolicy.cleanPodPolicy`` (None) leaves its pods that still run (a TFJob's parameter servers)."""
    if isinstance(obj, PyTorchJob):
        return _pytorch_job(obj)
    if isinstance(obj, PaddleJob | TFJob | XGBoostJob | JAXJob):  # their elasticPolicy reaches no pod
        fail_roles = frozenset() if obj.status.finished else _failing_roles(obj)
        key = job_key(obj.kind, obj.metadata.namespace or "default", obj.metadata.name)
        return JobInfo(key, fail_roles=fail_roles) if fail_roles else None
    if isinstance(obj, MPIJob):  # kept only once finished: a finished MPIJob runs no mpirun any more
        key = job_key(obj.kind, obj.metadata.namespace or "default", obj.metadata.name)
        return JobInfo(key, finished=True) if obj.status.finished else None
    if isinstance(obj, BatchJob):
        return _batch_job(obj)
    if isinstance(obj, VolcanoJob):
        actions = _volcano_eviction_actions(obj)
        key = job_key("VolcanoJob", obj.metadata.namespace or "default", obj.metadata.name)
        return JobInfo(key, eviction_actions=actions) if actions else None
    return None


def _pytorch_job(job: PyTorchJob) -> JobInfo | None:
    """A PyTorchJob's JobInfo (:func:`job_of`): its elastic range, and the replica types whose evicted
    pod fails it while it runs."""
    low, high = _elastic_range(job.spec.elastic_policy, job.spec.pytorch_replica_specs.get("Worker"))
    if high <= low:
        low = high = 0
    fail_roles = (
        frozenset() if job.status.finished else _never_restarting_roles(job.spec.pytorch_replica_specs)
    )
    if not high and not fail_roles:
        return None
    key = job_key(job.kind, job.metadata.namespace or "default", job.metadata.name)
    return JobInfo(key, low, high, fail_roles=fail_roles)


def _failing_roles(job: PaddleJob | TFJob | XGBoostJob | JAXJob) -> frozenset[str]:
    """The replica types (lower case) one evicted pod of which fails the whole job, by the training
    operator's rule for the kind. Each counts a pod that runs with a ``deletionTimestamp`` as a failed
    replica (pkg/core/status.go, ``UpdateJobReplicaStatuses``), and sets the Restarting condition that
    spares the job only for a pod already in phase Failed (pkg/controller.v1/common/pod.go,
    ``ReconcilePods``); then its ``UpdateJobStatus`` (pkg/controller.v1/<kind>/<kind>_controller.go):

    - PaddleJob and JAXJob fail on a replica type whose ``restartPolicy`` is Never (JAXJob's default,
      ``JAXJobDefaultRestartPolicy``; PaddleJob's is OnFailure) and mark the job Restarting for any other;
    - XGBoostJob marks it Restarting only under ExitCode and fails it under any other policy, Never
      (its default) as OnFailure or Always;
    - TFJob fails on a failed pod of any replica type, whatever its policy, unless the job already
      holds a Restarting condition or the pod is a Worker and ``enableDynamicWorker`` is set. A
      deleted OnFailure worker failing a TFJob is kubeflow/trainer#2124."""
    if isinstance(job, PaddleJob):
        return _never_restarting_roles(job.spec.paddle_replica_specs)
    if isinstance(job, JAXJob):
        return _never_restarting_roles(job.spec.jax_replica_specs, default="Never")
    if isinstance(job, XGBoostJob):
        specs = job.spec.xgb_replica_specs
        return frozenset(t.lower() for t, spec in specs.items() if spec.restart_policy != "ExitCode")
    dynamic = job.spec.enable_dynamic_worker
    # the operator's defaulting spells a replica type written in any case as its own (setTypeNameToCamelCase)
    return frozenset(t.lower() for t in job.spec.tf_replica_specs if not (dynamic and t.lower() == "worker"))


def _never_restarting_roles(specs: Mapping[str, ReplicaSpec], default: str = "OnFailure") -> frozenset[str]:
    """The replica types (lower case, as the pods' ``training.kubeflow.org/replica-type`` label) whose
    ``restartPolicy`` is ``Never``. The training operator counts a pod that failed, or that runs with a
    ``deletionTimestamp`` (an evicted one), as a failed replica (kubeflow/training-operator
    pkg/core/status.go, ``UpdateJobReplicaStatuses``); its PyTorchJob ``UpdateJobStatus``
    (pkg/controller.v1/pytorch/pytorchjob_controller.go) then marks the job Failed when that replica
    type's policy is Never, and Restarting (the pod made again) for any other: OnFailure, the default
    (``PytorchJobDefaultRestartPolicy``), Always or ExitCode. So one eviction of such a pod ends the job."""
    return frozenset(
        rtype.lower() for rtype, spec in specs.items() if (spec.restart_policy or default) == "Never"
    )


# what a Volcano Job's controller does, by default, with an evicted pod: it creates it again
VOLCANO_SYNC_JOB = "SyncJob"
# actions that take only the evicted pod: the default, and RestartPod (that pod alone, made again)
VOLCANO_POD_ONLY_ACTIONS = frozenset({VOLCANO_SYNC_JOB, "RestartPod"})
VOLCANO_EVICTED = "PodEvicted"  # the event of any deletion of a Job's pod, an eviction's included


def _volcano_eviction_actions(job: VolcanoJob) -> dict[str, str]:
    """A Volcano Job's action on an evicted pod, by task (``""``: a task the Job does not name), when one
    of them takes more than the pod (RestartJob, RestartTask, AbortJob, TerminateJob, CompleteJob or any
    other action but SyncJob and RestartPod); empty when none does.

    Its job controller calls any deletion of the Job's pod ``PodEvicted`` (volcano-sh/volcano
    pkg/controllers/job/job_controller_handler.go, ``deletePod``) and picks the action as
    ``applyPolicies`` does (job_controller_util.go): the pod's task's policies first, then the Job's, the
    first whose ``event`` or ``events`` hold ``PodEvicted`` or ``*`` deciding; none: ``SyncJob``, which
    creates the pod again. RestartJob restarts every pod of the Job, RestartTask every pod of the task;
    AbortJob, TerminateJob and CompleteJob kill the rest (volcano-sh/apis pkg/apis/bus/v1alpha1/actions.go).
    """
    job_level = _first_eviction_action(job.spec.policies) or VOLCANO_SYNC_JOB
    actions = {"": job_level}
    for task in job.spec.tasks:
        actions[task.name] = _first_eviction_action(task.policies) or job_level
    if all(action in VOLCANO_POD_ONLY_ACTIONS for action in actions.values()):
        return {}
    return actions


def _first_eviction_action(policies: list[VolcanoLifecyclePolicy]) -> str | None:
    for policy in policies:
        events = [*policy.events, policy.event] if policy.event else policy.events
        if VOLCANO_EVICTED in events or "*" in events:
            return policy.action
    return None


def _batch_job(job: BatchJob) -> JobInfo | None:
    """A batch/v1 Job that tolerates disruption, whose deadline runs (started, not suspended), or that
    runs and counts an evicted pod as failed (:func:`_counted_evictions`)."""
    tolerates = _ignores_disruption(job)
    deadline, started = job.spec.active_deadline_seconds, job.status.start_time
    if deadline is None or started is None or job.spec.suspend:
        deadline = started = None
    left, fails = (None, "") if tolerates else _counted_evictions(job)
    if not tolerates and deadline is None and left is None and not fails:
        return None
    key = job_key("Job", job.metadata.namespace or "default", job.metadata.name)
    uncounted = job.status.uncounted_terminated_pods
    policy = job.spec.pod_failure_policy
    return JobInfo(
        key,
        tolerates_disruption=tolerates,
        active_deadline=deadline,
        started_at=started,
        evictions_left=left,
        eviction_fails=fails,
        per_index_limit=job.spec.backoff_limit_per_index if left is not None else None,
        uncounted_failed=frozenset(uncounted.failed) if uncounted and left is not None else frozenset(),
        failure_rules=tuple(policy.rules) if policy else (),
        indexed_completions=_indexed_completions(job),
    )


def _indexed_completions(job: BatchJob) -> int | None:
    """An Indexed Job's ``spec.completions`` (0 when unset, which the API server refuses for Indexed:
    no index is then valid), None for a NonIndexed one."""
    if job.spec.completion_mode != "Indexed":
        return None
    return job.spec.completions or 0


JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation on an Indexed Job's pods
_GO_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi reads (no spaces, no underscores)


@dataclass(frozen=True, slots=True)
class FailedPod:
    """What the job controller reads of a Failed pod of its Job to decide whether to count it against
    ``backoffLimit`` (:func:`counts_failure`): ``exits``, each terminated container's (containers, then
    init containers) name and exit code (None: a terminated state without a readable one);
    ``conditions``, its status conditions' (type, status); ``index``, its completion index (None: no
    annotation, or one Go's ``strconv.Atoi`` refuses, or negative: ``getCompletionIndex``)."""

    uid: str
    exits: tuple[tuple[str, int | None], ...] = ()
    conditions: frozenset[tuple[str, str]] = frozenset()
    index: int | None = None

    @classmethod
    def of(cls, pod: Pod, uid: str) -> FailedPod:
        status = pod.status
        exits = tuple(
            (c.name, _exit_code(c.state.terminated))
            for c in (*status.container_statuses, *status.init_container_statuses)
            if c.state.terminated is not None
        )
        raw = pod.metadata.annotations.get(JOB_COMPLETION_INDEX)
        index = int(raw) if raw is not None and _GO_ATOI.fullmatch(raw) else None
        return cls(
            uid,
            exits,
            frozenset((c.type, c.status) for c in status.conditions),
            index if index is not None and index >= 0 else None,
        )


def _exit_code(terminated: Mapping[str, Any]) -> int | None:
    code = terminated.get("exitCode")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def counts_failure(job: JobInfo, pod: FailedPod) -> bool:
    """Whether the job controller counts ``pod`` (Failed, of ``job``) against its ``backoffLimit``.

    It does not count a failed pod of an Indexed Job whose completion index is unknown or not below
    ``spec.completions`` (``getValidPodsWithFilter``, ``trackJobStatusAndRemoveFinalizers``), nor one
    whose first matching ``podFailurePolicy`` rule is ``Ignore`` (``nonIgnoredFailedPodsCount``,
    ``matchPodFailurePolicy``: the rules in order, the first that matches decides; none: counted)
    (kubernetes pkg/controller/job/job_controller.go, pod_failure_policy.go). A rule that cannot be
    judged (an exit-code rule before any match, on a terminated container without its exit code), or a
    matching rule of an action not known here, keeps the failure counted: fewer evictions, never more."""
    limit = job.indexed_completions
    if limit is not None and (pod.index is None or pod.index >= limit):
        return False
    for rule in job.failure_rules:
        matched = _rule_matches(rule, pod)
        if matched is None:
            return True
        if matched:
            return rule.action != "Ignore"
    return True


def _rule_matches(rule: PodFailurePolicyRule, pod: FailedPod) -> bool | None:
    """``matchOnExitCodes``/``matchOnPodConditions``: a terminated container of the rule's name (any
    when unset) whose exit code, other than 0, the operator (In, NotIn) accepts; or a condition of the
    pod with a pattern's type and status. None when only an unreadable exit code could match."""
    codes = rule.on_exit_codes
    if codes is None:
        return any((p.type, p.status) in pod.conditions for p in rule.on_pod_conditions)
    unknown = False
    for name, code in pod.exits:
        if codes.container_name is not None and codes.container_name != name:
            continue
        if code is None:
            unknown = True
        elif code != 0 and _operator_accepts(codes.operator, code, codes.values):
            return True
    return None if unknown else False


def _operator_accepts(operator: str, code: int, values: list[int]) -> bool:
    """``isOnExitCodesOperatorMatching``: In, the code listed; NotIn, not listed; any other, no match."""
    if operator == "In":
        return code in values
    return operator == "NotIn" and code not in values


# the conditions of a Job that is over, or that its controller is ending (its pods are being deleted)
_JOB_OVER = frozenset({"Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"})
_JOB_FAILING_ACTIONS = frozenset({"FailJob", "FailIndex"})
DEFAULT_BACKOFF_LIMIT = 6  # the API server's default for spec.backoffLimit
MAX_INT32 = 2**31 - 1  # its default with backoffLimitPerIndex


def _counted_evictions(job: BatchJob) -> tuple[int | None, str]:
    """For a running Job that does not ignore ``DisruptionTarget``: how many more failed pods it survives,
    and the ``podFailurePolicy`` action that fails it on an eviction ("" when none may).

    The job controller counts a pod being deleted as failed (``isPodFailed``; with a podFailurePolicy,
    once it is Failed), unless the first rule it matches is ``Ignore``, and fails the Job when
    ``status.failed`` plus the failed pods not yet counted is above ``spec.backoffLimit``
    (``exceedsBackoffLimit``); a FailJob rule matched fails it at once (``getFailJobMessage``), a
    FailIndex rule its index (kubernetes pkg/controller/job/job_controller.go, syncJob and
    trackJobStatusAndRemoveFinalizers; pod_failure_policy.go). ``(None, "")`` for a Job that runs no
    pod: over, suspended, or not started (the controller sets ``status.startTime`` before it creates
    the first pod)."""
    over = any(c.type in _JOB_OVER and c.status == "True" for c in job.status.conditions)
    if over or job.spec.suspend or job.status.start_time is None:
        return None, ""
    action = _first_eviction_rule(job)
    if action in _JOB_FAILING_ACTIONS:
        return None, action
    limit = job.spec.backoff_limit
    if limit is None:
        limit = MAX_INT32 if job.spec.backoff_limit_per_index is not None else DEFAULT_BACKOFF_LIMIT
    uncounted = job.status.uncounted_terminated_pods
    failed = job.status.failed + (len(uncounted.failed) if uncounted else 0)
    return max(0, limit - failed), ""


def _first_eviction_rule(job: BatchJob) -> str | None:
    """The action of the first ``podFailurePolicy`` rule an evicted pod may match (an ``Ignore`` rule on
    anything but ``DisruptionTarget`` is passed over, as :func:`_ignores_disruption` reads it), None
    when none may: the failed pod is then counted."""
    policy = job.spec.pod_failure_policy
    for rule in policy.rules if policy else ():
        if rule.action != "Ignore" and _may_match_eviction(rule):
            return rule.action
    return None


def _elastic_range(policy: ElasticPolicy | None, worker: ReplicaSpec | None) -> tuple[int, int]:
    """(min, max) Worker replicas, with an unset bound defaulted as the training operator does.

    The operator's defaulting (``SetDefaults_PyTorchJob`` in pkg/apis/kubeflow.org/v1/pytorch_defaults.go)
    first sets every replica spec's unset ``replicas`` to 1, then (``setElasticPolicy``) an unset bound to
    the other one, and both to the Worker replicas only when both are unset; ``PET_NNODES`` is then
    ``MIN:MAX`` (pkg/controller.v1/pytorch/elastic.go). So a policy with one bound, or none, is a fixed
    size. Those defaults are never stored: no mutating webhook sets them (the operator's webhooks only
    validate, ``mutating=false`` in pkg/webhooks/pytorch), the reconciler applies them to its in-memory
    copy (``r.Scheme.Default(pytorchjob)`` in pytorchjob_controller.go) and writes only the status. So
    the object Spillway reads holds the user's fields, and this reader applies the same rule.
    """
    if policy is None:
        return 0, 0
    low, high = policy.min_replicas, policy.max_replicas
    if low is not None and high is not None:
        return low, high
    bound = low if low is not None else high
    if bound is not None:
        return bound, bound
    if worker is None:
        return 0, 0
    replicas = worker.replicas if worker.replicas is not None else 1
    return replicas, replicas


def _ignores_disruption(job: BatchJob) -> bool:
    """An ``Ignore`` rule on ``DisruptionTarget=True`` comes before every other rule an evicted pod may match.

    The job controller takes the rules in order and the first one the failed pod matches decides
    (``matchPodFailurePolicy``, kubernetes pkg/controller/job/pod_failure_policy.go). An earlier rule
    that may match an eviction and does not ignore it (FailJob, FailIndex, Count) fails the Job or
    counts against ``backoffLimit``, so the pods do not tolerate eviction. An ``Ignore`` rule on
    anything else is passed over: it cannot make an eviction count, and when it does not match (a
    container that handles SIGTERM, say) the later rules decide.
    """
    policy = job.spec.pod_failure_policy
    for rule in policy.rules if policy else ():
        if rule.action == "Ignore":
            if rule.on_exit_codes is None and any(_is_disruption(c) for c in rule.on_pod_conditions):
                return True
        elif _may_match_eviction(rule):
            return False
    return False


# exit codes of a container stopped by a signal it does not handle: 128 + SIGKILL, 128 + SIGTERM
_EVICTION_EXITS = frozenset({137, 143})
# conditions the kubelet and the scheduler set on every pod, whatever their status when it fails
_EVERY_POD_CONDITIONS = frozenset(
    {"PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"}
)


def _is_disruption(pattern: PodConditionPattern) -> bool:
    return pattern.type == DISRUPTION_TARGET and pattern.status == "True"


def _may_match_eviction(rule: PodFailurePolicyRule) -> bool:
    """Whether ``rule`` may match a pod that failed because it was evicted.

    An evicted container gets SIGTERM and exits 143, or 137 when SIGKILL ends it after the grace
    period. So ``NotIn`` matches unless its values hold both, and ``In`` matches when a value is a
    signal's exit (128 or more: a process stopped mid-work may also die of SIGABRT or SIGPIPE, 134 or
    141). As in the controller, ``onExitCodes`` is read before ``onPodConditions`` and an unknown
    operator matches nothing. A condition pattern matches when it names ``DisruptionTarget=True`` or a
    condition every pod carries (the controller compares it with all the pod's conditions); any other
    condition (``ConfigIssue``, a readiness gate's) is not set by an eviction.
    """
    codes = rule.on_exit_codes
    if codes is not None:
        if codes.operator == "NotIn":
            return not _EVICTION_EXITS.issubset(codes.values)
        if codes.operator == "In":
            return any(value >= 128 for value in codes.values)
        return False
    return any(_is_disruption(c) or c.type in _EVERY_POD_CONDITIONS for c in rule.on_pod_conditions)


@dataclass(frozen=True, slots=True)
class PodJobFacts:
    """What a pod says about its job: see the module docstring."""

    job: str | None = None  # a job key named by a label (None: the controller owner is the job)
    role: str | None = None  # the replica type, lower case ("worker", "master")
    batch_job: str | None = None  # the batch/v1 Job's name (batch.kubernetes.io/job-name)
    elastic: tuple[int, int] | None = None  # (MIN, MAX) from torchrun --nnodes or PET_NNODES
    # the launcher's command line sets the node count (torchrun --nnodes, Paddle's launcher), which beats
    # the job's elasticPolicy; with ``elastic`` None, a fixed count or one that cannot be read
    by_launcher: bool = False
    rdzv_host: bool = False  # the pod hosts its job's c10d rendezvous store (module docstring)
    # the torchrun that says the node count runs on more than one node and restarts no worker group
    # (--max-restarts 0): a node leaving ends the job (module docstring)
    no_restarts: bool = False


def pod_job_facts(pod: Pod) -> PodJobFacts:
    meta = pod.metadata
    role = meta.labels.get(KUBEFLOW_REPLICA_TYPE)
    elastic, by_launcher, no_restarts = _pod_elastic(pod)
    return PodJobFacts(
        job=_labelled_job(pod, meta.namespace or "default"),
        role=role.lower() if role else None,
        batch_job=meta.labels.get(BATCH_JOB_NAME) or None,
        elastic=elastic,
        by_launcher=by_launcher,
        rdzv_host=_hosts_rendezvous(pod),
        no_restarts=no_restarts,
    )


def _labelled_job(pod: Pod, namespace: str) -> str | None:
    meta = pod.metadata
    labels = meta.labels
    name = labels.get(KUBEFLOW_JOB_NAME)
    if name:
        owner = next((o for o in meta.owner_references if o.controller), None)
        if owner is not None and api_group(owner.api_version) == KUBEFLOW_GROUP:
            kind = owner.kind
        else:
            kind = _OPERATOR_KINDS.get(labels.get(KUBEFLOW_OPERATOR, ""), "KubeflowJob")
        return job_key(kind, namespace, name)
    name = labels.get(JOBSET_NAME)
    if name:
        return job_key("JobSet", namespace, name)
    name = labels.get(VOLCANO_JOB_NAME) or meta.annotations.get(VOLCANO_JOB_NAME)
    if name:
        return job_key("VolcanoJob", namespace, name)
    name = labels.get(BATCH_JOB_NAME)
    return job_key("Job", namespace, name) if name else None


def _env(container: Container, name: str) -> tuple[bool, str | None]:
    """Whether ``container`` defines ``name``, and the value it runs with: the last definition's (the
    kubelet's order), None when that one comes from ``valueFrom`` (not visible here)."""
    defined, value = False, None
    for var in container.env:
        if var.name == name:
            defined, value = True, var.value
    return defined, value


def _expand(container: Container, value: str) -> str | None:
    """``value`` with its variable references (``$(VAR)``, ``${VAR}``, ``$VAR``) read from the container's
    env; None when one cannot be read (unset, ``valueFrom``) or a ``$`` is left."""
    missing = False

    def lookup(match: re.Match[str]) -> str:
        nonlocal missing
        found = _env(container, next(g for g in match.groups() if g))[1]
        missing = missing or found is None
        return found or ""

    expanded = _VARIABLE.sub(lookup, value)
    return None if missing or "$" in expanded else expanded


def _flag(container: Container, flag: re.Pattern[str]) -> tuple[bool, str | None]:
    """Whether the command line gives ``flag``, and its value with variables expanded (None: unreadable)."""
    match = flag.search(" ".join(container.command + container.args))
    return (True, _expand(container, match.group(1))) if match else (False, None)


def _torchrun_setting(
    container: Container, flag: re.Pattern[str], env_name: str
) -> tuple[str, str | None] | None:
    """What torchrun in ``container`` takes for one setting, and from where: ``("flag", value)`` from its
    command line, else ``("env", value)`` from the ``PET_`` variable, which is only the flag's default
    (torch/distributed/argparse_util.py); the value None when it cannot be read, None when neither says."""
    given, value = _flag(container, flag)
    if given:
        return "flag", value
    defined, value = _env(container, env_name)
    if not defined:
        return None
    return "env", _expand(container, value) if value is not None else None


def _pod_elastic(pod: Pod) -> tuple[tuple[int, int] | None, bool, bool]:
    """The first container's word on the node count that says one (``--nnodes``, else ``PET_NNODES``;
    Paddle's launcher reads its own, :func:`_paddle_nnodes`): ``(MIN, MAX)`` for a range, None for a
    fixed count, one that cannot be read or none at all; whether the launcher's command line said
    it (PodJobFacts.by_launcher); and whether that torchrun, on more than one node (a count other than
    ``1``, elastic or fixed, or one that cannot be read), restarts no worker group (:func:`_no_restarts`)."""
    for container in pod.spec.containers:
        if _PADDLE_LAUNCH.search(" ".join(container.command + container.args)):
            return _paddle_nnodes(container), True, False
        said = _torchrun_setting(container, _NNODES_FLAG, PET_NNODES)
        if said is not None:
            where, value = said
            no_restarts = not (value is not None and _one_node(value)) and _no_restarts(container)
            return (_range(value) if value is not None else None), where == "flag", no_restarts
    return None, False, False


def _one_node(value: str) -> bool:
    """The node count (``N`` or ``MIN:MAX``) is one node at most: no other node's workers to fail."""
    low, sep, high = value.strip().partition(":")
    top = _count(high if sep else low)
    return top is not None and top <= 1


def _no_restarts(container: Container) -> bool:
    """torchrun in ``container`` restarts no worker group: ``--max-restarts`` (``--max_restarts``), else
    ``PET_MAX_RESTARTS``, is 0, or says nothing (torchrun's default is 0), or cannot be read.

    A node that leaves an elastic job is not announced: the workers of the others fail in their next
    collective, and each agent restarts its worker group (a new rendezvous, without the node) only while
    it has restarts left; with none it stops, closes the rendezvous and the job ends, left to the job's
    controller to restart (pytorch/pytorch torch/distributed/elastic/__init__.py, "Scale down event";
    agent/server/api.py, ``_invoke_run``). The training operator passes ``elasticPolicy.maxRestarts`` as
    ``PET_MAX_RESTARTS``, and only when it is set (pkg/controller.v1/pytorch/elastic.go, ``Generate``)."""
    said = _torchrun_setting(container, _MAX_RESTARTS_FLAG, PET_MAX_RESTARTS)
    value = said[1] if said is not None else None
    restarts = _count(value) if value is not None else None
    return not (restarts is not None and restarts > 0)


def _paddle_setting(container: Container, flag: re.Pattern[str], env_name: str) -> str:
    """What Paddle's launcher takes for one setting: its ``PADDLE_`` variable when the container sets it,
    which overrides the flag (python/paddle/distributed/launch/context/__init__.py, ``set_env_in_args``),
    else the flag; empty when neither says or it cannot be read."""
    defined, value = _env(container, env_name)
    if not defined:
        value = _flag(container, flag)[1]
    return value or ""


def _paddle_nnodes(container: Container) -> tuple[int, int] | None:
    """Paddle's launcher runs elastic only with an ``etcd://`` master (launch/controllers/collective.py,
    ``CollectiveElasticController.enable``); any other master waits for MAX peers (launch/job/job.py,
    ``set_replicas``), a fixed size. Under the training operator both come from the variables it sets
    (``PADDLE_NNODES`` the total replicas, ``PADDLE_MASTER`` a pod's address), which win over the flags."""
    if not _paddle_setting(container, _MASTER_FLAG, PADDLE_MASTER).startswith("etcd://"):
        return None
    return _range(_paddle_setting(container, _NNODES_FLAG, PADDLE_NNODES))


def _hosts_rendezvous(pod: Pod) -> bool:
    """The rendezvous endpoint's host (``--rdzv-endpoint``, else ``PET_RDZV_ENDPOINT``) names this pod:
    its name or its host name, alone or as the first label of a DNS name (``<job>-worker-0``,
    ``<job>-worker-0.<namespace>.svc``, a JobSet pod's ``<host name>.<subdomain>``). torch compares the
    endpoint with the machine's host name and addresses (rendezvous/utils.py,
    ``_matches_machine_hostname``); a pod's host name is its ``spec.hostname``, else its name."""
    for container in pod.spec.containers:
        said = _torchrun_setting(container, _RDZV_ENDPOINT_FLAG, PET_RDZV_ENDPOINT)
        if said is not None:
            endpoint = said[1]
            if endpoint is None:
                return True  # an endpoint that cannot be read may be this pod: never moved
            host = endpoint.rsplit(":", 1)[0] if not endpoint.startswith("[") else ""
            names = {n.lower() for n in (pod.metadata.name, pod.spec.hostname) if n}
            return host.split(".", 1)[0].lower() in names
    return False


def _range(value: str) -> tuple[int, int] | None:
    low, sep, high = value.strip().partition(":")
    least, most = _count(low), _count(high)
    if not sep or least is None or most is None:
        return None
    return least, most


def _count(text: str) -> int | None:
    """A count as torchrun reads it with Python's ``int``, ASCII digits only; None when it cannot be read,
    which includes more than 4,300 digits (``int`` refuses them, torchrun too, so it never starts)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def flag(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


# what Go's strconv.ParseBool reads as true and as false; it refuses anything else
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_bool(value: str) -> bool | None:
    """``value`` read as Go's ``strconv.ParseBool`` reads it; None where Go answers an error."""
    return True if value in _GO_TRUE else False if value in _GO_FALSE else None


def volcano_preemptable(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """``volcano.sh/preemptable`` says true as Volcano reads it (volcano-sh/volcano
    pkg/scheduler/api/pod_info.go, ``GetPodPreemptable``): the annotation decides when present, the
    label only when there is no annotation, each value parsed by Go's ``strconv.ParseBool``, a value it
    refuses being false. Only a pod marked true counts: Volcano's own default for an unmarked pod is its
    scheduler's business, not the pod's word that it may move."""
    source = annotations if VOLCANO_PREEMPTABLE in annotations else labels
    return go_bool(source.get(VOLCANO_PREEMPTABLE, "")) is True


def do_not_drain(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """``openai/do-not-drain`` protects the pod as kubernetes-ec2-autoscaler reads its label
    (autoscaler/kube.py ``KubePod.is_critical`` through autoscaler/utils.py ``parse_bool_label``: the
    value, lower-cased, is ``1`` or ``true``); the same value as an annotation protects it too."""
    return any(str(m.get(DO_NOT_DRAIN)).lower() in ("1", "true") for m in (labels, annotations))


DO_NOT_DRAIN_VALUES = "1 or true, in any case (kubernetes-ec2-autoscaler's reading)"
