"""A local Kubernetes API server that speaks the real REST wire protocol, for tests and ``spillway demo``.

The official ``kubernetes`` Python client talks to it unchanged::

    from kubernetes.client import CoreV1Api
    from spillway.local.kubeapi import KubeApiServer

    with KubeApiServer() as api:
        api.add({"kind": "Node", "metadata": {"name": "n1"}})
        nodes = CoreV1Api(api.api_client()).list_node().items

It is a ``ThreadingHTTPServer`` on 127.0.0.1 in a background thread; stdlib only (the ``kubernetes``
package is imported by :meth:`KubeApiServer.api_client` alone).

What it serves (JSON only)
--------------------------
* ``/api/v1/nodes`` (+ ``/status``), ``/api/v1/namespaces/{ns}/pods`` (+ ``/status``, ``/eviction``,
  ``/binding``), ``/api/v1/pods``, ``/apis/policy/v1/[namespaces/{ns}/]poddisruptionbudgets``
  (+ ``/status``), ``/api/v1/[namespaces/{ns}/]events``, ``/apis/events.k8s.io/v1/[namespaces/{ns}/]events``
  (one store, converted between the two versions), ``/api/v1/namespaces``,
  ``/api/v1/[namespaces/{ns}/]podtemplates``, ``/api/v1/[namespaces/{ns}/]resourcequotas`` (+ ``/status``:
  ``status.hard`` and ``status.used`` stored as written, as no quota controller runs here), ``/apis/batch/v1/[namespaces/{ns}/]jobs`` (+ ``/status``),
  ``/api/v1/[namespaces/{ns}/]persistentvolumeclaims`` and ``/api/v1/persistentvolumes`` (+ ``/status``),
  ``/apis/storage.k8s.io/v1/storageclasses`` (``volumeBindingMode`` defaulted to ``Immediate`` and
  ``reclaimPolicy`` to ``Delete``, as the API server does), ``/apis/storage.k8s.io/v1/csinodes``,
  ``/apis/storage.k8s.io/v1/volumeattachments`` (+ ``/status``; a create's status reset to ``attached:
  false``, the spec immutable),
  ``/apis/scheduling.k8s.io/v1/priorityclasses`` (``system-node-critical`` and
  ``system-cluster-critical`` there from the start; ``preemptionPolicy`` defaulted to
  ``PreemptLowerPriority``; a ``value`` that is no int32 answers 400),
  ``/apis/apps/v1/[namespaces/{ns}/]deployments`` (and ``statefulsets``, ``replicasets``,
  ``daemonsets``, and ``/api/v1/[namespaces/{ns}/]replicationcontrollers``: stored as given, no
  controller runs them);
  get, list, create, replace (PUT), patch, delete and deletecollection on each; discovery (``/version``, ``/api``, ``/apis``,
  ``/api/v1``, ``/apis/<group>[/<version>]``) and ``/healthz``.
* Optional resources, served only while installed (``KubeApiServer(optional_resources=[...])``, a
  settable property; default all; others answer 404 and are left out of discovery, as on a cluster
  without the CRD): the custom resources PodGroup ``scheduling.x-k8s.io/v1alpha1`` (coscheduling,
  ``/status``), PodGroup ``scheduling.volcano.sh/v1beta1`` (Volcano: no status subresource, as its CRD),
  CapacityQuota ``autoscaling.x-k8s.io/v1beta1`` (cluster-scoped, ``/status``), ProvisioningRequest
  ``autoscaling.x-k8s.io/v1`` (``/status``; changing ``spec.provisioningClassName``, ``spec.podSets`` or
  ``spec.parameters`` answers 422 as the CRD's ``self == oldSelf`` rules do; also served as ``v1beta1``
  over the same objects, as today's published CRD serves that version, deprecated: every answer through
  it carries the CRD's ``deprecationWarning``), CapacityBuffer
  ``autoscaling.x-k8s.io/v1beta1`` (``/status``; also served as ``v1alpha1`` over the same objects, as
  the published CRD serves that version, deprecated: every answer through it carries the API server's
  ``Warning`` header), PyTorchJob, PaddleJob, TFJob, XGBoostJob and JAXJob ``kubeflow.org/v1``
  (``/status``), MPIJob ``kubeflow.org/v2beta1`` (``/status``, kubeflow/mpi-operator's), and the alpha
  built-ins PodGroup ``scheduling.k8s.io/v1alpha2`` (``/status``) and Workload
  ``scheduling.k8s.io/v1alpha1``. Names are ``<plural>.<group>`` (``resources.OPTIONAL``). The
  training operator's MPIJob ``kubeflow.org/v1`` (``/status``), a CRD of the same name as the
  mpi-operator's, is served only when named ``mpijobs.kubeflow.org/v1`` (``resources.ALTERNATIVES``), in
  place of the mpi-operator's, never beside it; so are cluster-autoscaler's earlier CRDs,
  ``capacityquotas.autoscaling.x-k8s.io/v1alpha1`` (v1alpha1 alone, a status of no field),
  ``capacityquotas.autoscaling.x-k8s.io/v1alpha1+status`` (v1alpha1 alone, its later release: a status
  of ``used`` and ``conditions``) and
  ``provisioningrequests.autoscaling.x-k8s.io/v1beta1`` (v1beta1 alone, v1's schema and rules). The three
  ``autoscaling.x-k8s.io`` kinds are served as their published CRDs' schemas and CEL rules serve them
  (see :mod:`.crds`): the whole object is validated, status included, so a ``/status`` write too (422
  naming each field; a quota's limits non-negative integers, a request's podSets 1 to 32, a buffer's
  refs), pruned of the fields the structural schema does not declare (a buffer's ``spec.windows`` is
  dropped, as a cluster drops it) and defaulted (a buffer's ``provisioningStrategy``), on every write
  and on ``add()`` alike. So are both PodGroup CRDs, Volcano's and coscheduling's, by their published
  structural schemas (unknown fields pruned, a Volcano group's ``spec.queue`` defaulted to ``default``,
  a coscheduling group's ``minMember`` at least 1; no CEL rules), and the five Kubeflow kinds by the
  training operator's (unknown fields pruned, the pod template's included; the replica specs
  required; ``runPolicy.suspend`` defaulted to false; ``runPolicy.schedulingPolicy.queue`` immutable,
  as its CEL rule says; the embedded PodSpec declared to the fields of its containers, kept whole below:
  :mod:`.crds` says exactly how it differs from the published one; the training operator's MPIJob
  too), and MPIJob v2beta1 by the mpi-operator's (the same replica specs and run policy, its own spec
  defaults, no CEL rule). Rollout is stored as given, no
  schema modelled. Custom resources refuse strategic merge patch with 415, as a real server does.
* The ``scale`` subresource of the kinds whose CRD declares one (``ResourceType.scale``): Rollout, and
  PyTorchJob and PaddleJob over their Worker replicas (``.spec.<kind>ReplicaSpecs.Worker.replicas``,
  ``.status.replicaStatuses.Worker.active``/``.selector``, as the training operator's CRDs declare it).
  get, update (PUT) and patch (JSON or merge) answer ``autoscaling/v1`` Scale as apiextensions-apiserver's
  ``ScaleREST`` does: status replicas 0 and selector "" when absent; no spec replicas is a 500 on GET
  ("the spec replicas field ... does not exist") and a 400 on a write that gives none; a write sets the
  spec path only (status kept; a stale ``resourceVersion`` is a 409), and every write of such a kind
  keeps its replicas non-negative int32s (422, ``ValidateScaleSpec``/``ValidateScaleStatus``).
* Validation answers every problem it finds at once, as ``errors.NewInvalid`` does: one 422 ``Invalid``
  Status whose ``details`` (``group``, ``kind``, ``name``) carry a cause per field error (``reason``
  ``FieldValueInvalid``, ``FieldValueRequired``, ``FieldValueTypeInvalid``, ``FieldValueNotSupported``
  ...; ``message``; ``field``), its message ``<Kind>[.<group>] "<name>" is invalid: `` then the one
  error or all of them in brackets. A CRD's CEL rules run only when its schema found no blocking error
  (a wrong type, a required field missing, an unsupported value, too long, too many); otherwise a last
  cause (field ``<nil>``) says some rules were not checked, as apiextensions-apiserver writes it.
* Every write gets a new cluster-wide ``metadata.resourceVersion`` (monotonic); a PUT or patch carrying a
  stale one, or a DeleteOptions precondition that fails, answers 409 ``Conflict``; an empty one is
  unconditional. A write that changes nothing does not bump the version. Writes to the main resource of
  a kind with a status subresource (Pods, Nodes, PDBs, and the resources above marked ``/status``) keep
  the old ``status``; the ``/status`` subresource changes only ``status``.
* Patches: JSON merge patch, strategic merge patch and JSON patch (see :mod:`.patch`). As on a real
  server, ``Node.spec.taints`` is an *atomic* list: a strategic merge patch carrying taints replaces
  the whole list (read, modify, and send the full list with the ``resourceVersion`` to be safe).
  Server-side apply answers 415.
* Lists: a built-in kind's items carry no ``apiVersion`` and ``kind`` (the list does), as the API server
  encodes them; a custom resource's items keep both. ``limit``/``continue`` paging over a snapshot taken
  when the list started (every page reports
  that snapshot's resourceVersion; ``remainingItemCount`` when no selector was given); the token is
  opaque, snapshots (one per paged list) are kept in a bounded LRU (``max_snapshots``), and a token whose snapshot is gone
  or that :meth:`Faults.expire_continue_tokens` expired answers 410 ``Expired``. ``labelSelector``
  (``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!``, ``>``, ``<``) and ``fieldSelector``
  (``=``, ``==``, ``!=``; per kind the fields the real API indexes, e.g. ``spec.nodeName``,
  ``status.phase``, ``metadata.name``, ``metadata.namespace``, ``spec.unschedulable``,
  ``involvedObject.name``; others answer 400 ``field label not supported``). A boolean field
  (``spec.unschedulable``, ``spec.hostNetwork``) left out reads ``false``, as the API indexes a Go bool.
* Eviction (policy/v1): see :meth:`Store.evict`; a pod Pending, finished or already terminating is
  evicted without a look at budgets; a refusal is 429 ``TooManyRequests`` with
  "Cannot evict pod as it would violate the pod's disruption budget." and a ``details.causes`` entry
  of reason ``DisruptionBudget``; a running pod more than one budget selects is refused with the bare
  500 Status the real server writes (``Failure``, "This pod has more than one PodDisruptionBudget,
  which the eviction subresource does not support.", no reason, no details); success is 201 with a
  ``Success`` Status: the pod gets the condition ``DisruptionTarget=True`` (reason
  ``EvictionByEvictionAPI``) and is deleted gracefully with the Eviction's ``deleteOptions`` (their
  ``gracePeriodSeconds``; their ``dryRun``, or the request's, makes the whole eviction a dry run; their
  ``preconditions`` are the deletion's, checked after the budget: 409 when they fail).
  PDB ``status`` (``disruptionsAllowed``, ``currentHealthy``, ``desiredHealthy``, ``expectedPods``, a
  ``DisruptionAllowed`` condition) is computed on every read from the pods (healthy: Ready and not
  terminating) and, for ``maxUnavailable`` or a percentage ``minAvailable``, from the scale
  (``spec.replicas``) of the pods' controllers, a custom kind's through its scale subresource (a
  PyTorchJob counts its Worker replicas); see :mod:`.disruption` for the arithmetic. An eviction a
  budget lets go records the pod in its ``disruptedPods`` before the deletion checks the preconditions:
  a pod recorded there and not being deleted (the deletion failed: 409) is not healthy for two minutes
  (the disruption controller's ``DeletionTimeout``), so such an eviction keeps its budget spent that long.
* Graceful deletion of Pods (see :mod:`.deletion`): deleting (or evicting) a scheduled pod that is not
  ``Succeeded``/``Failed`` sets ``deletionTimestamp`` (now plus the grace period) and
  ``deletionGracePeriodSeconds`` (the DeleteOptions', else ``terminationGracePeriodSeconds``, 30 by
  default) and answers the pod; it stays listed until the emulated kubelet confirms: the store removes
  it once ``min(grace period, kubelet_exit_delay)`` seconds of its clock have passed, at the next read
  or write (``KubeApiServer.kubelet_exit_delay``, default 0.5 s; set it long to hold pods terminating,
  or 0), plus ``KubeApiServer.kubelet_confirm_delay`` (default 0: a real kubelet's final delete comes
  a moment after the containers stopped, past the deletionTimestamp). An unscheduled or finished pod, or a delete of grace 0, goes at once; a second delete may only
  shorten the grace period. A DELETE's options are its body when it has one (``dryRun`` included),
  else its query (``gracePeriodSeconds``, ``dryRun``). :meth:`KubeApiServer.delete` (the test's hand)
  removes at once. Other kinds are deleted at once; deleting a Namespace answers it ``Terminating``
  and removes its contents.
* A create through the API leaves of the ``status`` it sends what the kind's registry strategy does
  (``ResourceType.create_status``): Deployments, Jobs, ResourceQuotas and PDBs start with an empty
  status; StatefulSets, ReplicaSets, ReplicationControllers and DaemonSets with the counts their Go
  types never omit at 0 (``replicas``; a StatefulSet's ``availableReplicas``; a DaemonSet's
  ``currentNumberScheduled``, ``numberMisscheduled``, ``desiredNumberScheduled`` and ``numberReady``),
  which every later status keeps; Pods and PersistentVolumeClaims
  ``Pending``, PersistentVolumes ``Pending`` with the transition time stamped, Namespaces ``Active``,
  custom resources with a ``/status`` subresource without one; Nodes keep theirs (less
  ``status.config``). Controllers then write status through ``/status``. ``add()`` keeps the status you
  give (what a controller already wrote).
* Pods as the API server stores them (see :mod:`.pods`): every write is defaulted as the ``v1``
  defaults default it (``restartPolicy``, ``dnsPolicy``, ``schedulerName``,
  ``terminationGracePeriodSeconds``, a negative one made 1 as since 1.27, ``securityContext``,
  ``enableServiceLinks``; a container's requests
  left out copy its limits; pod-level requests; containers' ``imagePullPolicy`` by tag and termination
  message path and policy; host ports of a ``hostNetwork`` pod). A create, and an update of the pod
  itself, goes through the DefaultTolerationSeconds admission plugin (a pod not tolerating
  ``node.kubernetes.io/not-ready`` or ``node.kubernetes.io/unreachable`` with effect ``NoExecute`` gets
  a toleration of it, ``Exists``, for 300 s, after its own). A create goes through the Priority
  admission plugin (``spec.priority`` and ``spec.preemptionPolicy`` from ``priorityClassName``, else the
  global default class, else 0 and ``PreemptLowerPriority``; an unknown class, or a priority or policy
  stated otherwise, answers 403) and gets ``status.qosClass`` (Guaranteed, Burstable or BestEffort from
  the CPU and memory its containers, init containers or pod-level resources request and limit; a class
  the create's status carries is kept, as ``GetPodQOS`` keeps it). ``add()`` stands for a pod a cluster
  already stored, so admitted: it gets the DefaultTolerationSeconds tolerations as a create does (the
  plugin is on by default since Kubernetes 1.6; a pod that has them keeps its own), and Priority keeps
  what it states and fills what it lacks, its QoS class included. A status write that leaves
  ``qosClass`` out keeps it, one changing it answers 422; an update leaving ``spec.priority`` out keeps it; a write changing a pod's
  resources so that its class would change answers 422 (the ``pods/resize`` rule). A quantity that does
  not parse answers 400. A Pod, or a PodTemplate's template, whose container or init container asks
  for resources the API server refuses answers 422 (``ValidateResourceRequirements``): a fraction of
  an extended resource (``nvidia.com/gpu: 500m``, ``must be an integer``), a quantity below zero, a
  request of an extended resource or huge pages without its limit (``Limit must be set for non
  overcommitable resources``) or other than it, a request of CPU or memory above its limit. A Pod's
  limits default its requests first; a PodTemplate's do not. Pod-level resources are not checked.
* The node lifecycle controller's NoSchedule tainting pass (see :mod:`.nodelifecycle`): after every
  write of a Node (through the API or ``add``/``update``), at the next request once
  ``KubeApiServer.node_controller_delay`` (default 0) has passed, a cordoned Node
  (``spec.unschedulable``) gets ``node.kubernetes.io/unschedulable:NoSchedule`` and one uncordoned loses
  it; a Ready ``False``/``Unknown`` condition gives ``node.kubernetes.io/not-ready``/``unreachable``, a
  ``MemoryPressure``, ``DiskPressure``, ``PIDPressure`` or ``NetworkUnavailable`` ``True`` its own key,
  all NoSchedule. The controller's own write (new resourceVersion, ``timeAdded`` stamped, other taints
  kept) comes after the write that called for it: the write's answer does not show it, and a writer
  holding the version read before it gets 409.
* Labels, on every kind (see :mod:`.labels`): ``metadata.labels`` decode as a map of strings (another
  JSON type: 400) and are validated as ``ValidateLabels`` does (a key that is no qualified name, a value
  over 63 characters or of other characters: 422 at ``metadata.labels``, with the kind's other errors);
  a merge patch's null removes a label, an empty value is kept.
* Event names, by the API an Event is created through (``ValidateEventCreate``): ``events.k8s.io/v1``
  holds ``metadata.name`` to a DNS subdomain of at most 253 characters (422); ``v1`` skips that for
  backwards compatibility and refuses only ``.``, ``..`` and names with ``/`` or ``%`` (any length).
  An Event without ``eventTime`` sits in its object's namespace (``default`` or none for a
  cluster-scoped one; else 422 at ``involvedObject.namespace``); one with ``eventTime`` may be about an
  object of any namespace, one about a cluster-scoped object sits in ``default`` or ``kube-system``, and
  it names its ``reportingController`` (a qualified name), ``reportingInstance``, ``action`` and
  ``reason`` (at most 128 bytes each; its message at most 1024). Its object may be of any kind, a
  custom resource's too (``legacyValidateEvent``).
* Auth: any ``Authorization: Bearer`` token is accepted unless ``require_token`` is set (then 401
  ``Unauthorized``); :attr:`KubeApiServer.last_token` is the last token seen.
* Faults (:class:`Faults`): ``fail_next(n, status, path_prefix, retry_after=...)``, ``delay(seconds, path_prefix)``,
  ``expire_continue_tokens()``; :attr:`KubeApiServer.requests` logs method, path, query, status, token.
  An injected 429 is API Priority and Fairness's refusal: plain text, no Status, ``Retry-After``; an
  injected 403 is RBAC's, naming the user ``spillway``, the request's verb, resource, group and scope.
  Either given a ``message`` is a plain Status with those words.

Not modelled
------------
Watches (``watch=true`` answers 400), protobuf/CBOR/YAML bodies, server-side apply, field validation
and pruning of object schemas (beyond names, PDB specs, pods needing containers, the CRDs above;
``metadata`` is kept as sent, not pruned to ObjectMeta), pod spec
immutability (so no ``pods/resize`` subresource: an in-place resize is a write to the pod, its
containerStatuses a ``/status`` write, as the kubelet's), admission but the pod side of the
Priority and DefaultTolerationSeconds plugins (no LimitRanger, no single-global-default rule for
PriorityClasses),
the NoExecute taints of taint-based eviction and the taint eviction controller, node heartbeats,
RBAC, finalizers and garbage collection (deleting a Node leaves its pods), ``resourceVersion`` /
``resourceVersionMatch`` on lists (always the latest state), controllers (workloads are stored, never
run: no pods are created or replaced; the disruption controller's arithmetic is computed on read, but
not its ``UnmanagedPods`` and ``NotDeleted`` events nor its last good numbers after a failed sync), the
kubelet beyond two steps (pods run only when you ``bind`` them or write their status; a terminating
pod is removed after ``kubelet_exit_delay``, whatever its node), the stale ``DisruptionTarget``
condition the disruption controller resets, and ``observedGeneration`` lagging behind a budget's ``generation`` (the eviction's "still
being processed" 429).
"""

from spillway.local.kubeapi.server import DEFAULT_TOKEN, Faults, KubeApiServer, RequestRecord
from spillway.local.kubeapi.status import KubeApiError
from spillway.local.kubeapi.store import DEFAULT_NAMESPACES, Store

__all__ = [
    "DEFAULT_NAMESPACES",
    "DEFAULT_TOKEN",
    "Faults",
    "KubeApiError",
    "KubeApiServer",
    "RequestRecord",
    "Store",
]
