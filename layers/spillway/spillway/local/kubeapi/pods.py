"""What the API server makes of a Pod beyond storing it, from kubernetes/kubernetes:

* the ``v1`` defaults (``pkg/apis/core/v1/defaults.go``), applied to every body decoded, an update's
  as a create's (:func:`with_defaults`): ``SetDefaults_PodSpec`` (``dnsPolicy``, ``restartPolicy``,
  ``securityContext``, ``terminationGracePeriodSeconds``, ``schedulerName``), ``SetDefaults_Pod``
  (a container's requests left out copy its limits, per resource; pod-level requests, PodLevelResources,
  from what the containers request or else the pod-level limits; ``enableServiceLinks``; with
  ``hostNetwork`` a container port is a host port) and ``SetDefaults_Container`` for app, init and
  ephemeral containers (``imagePullPolicy`` by the image's tag, ``terminationMessagePath`` and
  ``terminationMessagePolicy``); a container port's ``protocol`` defaults to TCP;
* a negative ``terminationGracePeriodSeconds`` is 1, as the conversion of a Pod (not of a pod template)
  has made it on every decode since 1.27 (kubernetes/kubernetes#115606, ``Convert_v1_Pod_To_core_Pod``);
* the QoS class the Pod strategy stamps on create (``pkg/apis/core/helper/qos``, :func:`qos_class`);
* the DefaultTolerationSeconds admission plugin (``plugin/pkg/admission/defaulttolerationseconds``,
  :func:`admit_default_tolerations`), on a create or an update of the pod itself: a pod not tolerating
  ``node.kubernetes.io/not-ready`` or ``node.kubernetes.io/unreachable`` with effect NoExecute gets a
  toleration of it for 300 s;
* the Priority admission plugin (``plugin/pkg/admission/priority``, :func:`admit_priority`): a pod's
  ``spec.priority`` and ``spec.preemptionPolicy`` come from its PriorityClass, or the global default
  one (the lowest valued if several), or are 0 and ``PreemptLowerPriority``; stating others is
  forbidden; plus the PriorityClasses the API server creates itself and their defaults.

Not modelled: LimitRanger's and other admission plugins' defaults, probes' and volumes' defaults, a pod template's defaults (Deployments, Jobs ...), pod-level
limits defaulted from the containers', the rounding of quantities to milli units (kept as sent; the QoS
class is computed on the rounded values).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from spillway.local.kubeapi.crds import QUANTITY_PATTERN, json_type
from spillway.local.kubeapi.status import KubeApiError, bad_request

JsonObj = dict[str, Any]

GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
#: the classes the API server creates at start (``SystemPriorityClasses``), above any a user may define
SYSTEM_PRIORITY_CLASSES: tuple[JsonObj, ...] = (
    {
        "metadata": {"name": "system-node-critical"},
        "value": 2000001000,
        "description": "Used for system critical pods that must not be moved from their current node.",
    },
    {
        "metadata": {"name": "system-cluster-critical"},
        "value": 2000000000,
        "description": "Used for system critical pods that must run in the cluster, but can be moved to "
        "another node if necessary.",
    },
)
_QOS_RESOURCES = ("cpu", "memory")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_QUANTITY = re.compile(QUANTITY_PATTERN)
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_SCALE = {
    **{s: Fraction(10) ** e for s, e in {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9}.items()},
    **{s: Fraction(10) ** e for s, e in {"T": 12, "P": 15, "E": 18}.items()},
    **{s: Fraction(2) ** e for s, e in {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}.items()},
}
_INT32 = range(-(2**31), 2**31)


# --- quantities --------------------------------------------------------------------------------------


def _undecodable(kind: str, why: str) -> KubeApiError:
    return bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {why}')


def quantity(value: Any) -> Fraction:
    """The amount of a resource quantity (a string as ``500m`` or ``1Gi``, or a JSON number), rounded up
    to milli units as the v1 defaults round it; 400 as the server's decoder answers when it does not
    parse (a JSON null decodes to zero)."""
    if value is None:
        return Fraction(0)
    text = value if isinstance(value, str) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = str(value)
    number = _NUMBER.match(text) if text is not None and _QUANTITY.match(text) else None
    if text is None or number is None:
        raise _undecodable(
            "Pod",
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )
    suffix = text[number.end() :]
    scale = _SCALE.get(suffix)
    if scale is None:  # an exponent: e3, E-2 (a fractional one does not parse)
        try:
            scale = Fraction(10) ** int(suffix[1:])
        except ValueError:
            raise _undecodable("Pod", "unable to parse quantity's suffix") from None
    amount = Fraction(Decimal(number.group())) * scale
    return Fraction(math.ceil(amount * 1000), 1000)


def _amounts(resources: Any) -> dict[str, Fraction]:
    """A resource list's amounts (every one parsed, as the decoder does)."""
    if not isinstance(resources, dict):
        return {}
    return {name: quantity(value) for name, value in resources.items()}


def _requirements(holder: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A container's (or the pod's) ``resources``: its requests and limits, each ``{}`` when left out."""
    resources = holder.get("resources") if isinstance(holder, dict) else None
    if not isinstance(resources, dict):
        return {}, {}
    requests, limits = resources.get("requests"), resources.get("limits")
    return (requests if isinstance(requests, dict) else {}), (limits if isinstance(limits, dict) else {})


def _containers(spec: JsonObj, field: str) -> list[JsonObj]:
    found = spec.get(field)
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


# --- defaults ------------------------------------------------------------------------------------------


def _pull_policy(image: Any) -> str:
    """``Always`` for an image tagged ``latest`` or neither tagged nor pinned by digest (so ``latest``),
    else ``IfNotPresent``."""
    reference = image if isinstance(image, str) else ""
    name, _, digest = reference.partition("@")
    last = name.rsplit("/", 1)[-1]  # a registry's port (``localhost:5000/x``) is no tag
    tag = last.partition(":")[2]
    return "Always" if tag == "latest" or (reference and not tag and not digest) else "IfNotPresent"


def _filled(given: JsonObj, defaults: JsonObj) -> JsonObj:
    """``given`` with each default put where it has nothing (left out, null or empty: what a Go zero
    value or nil pointer decodes from; a ``0`` or ``false`` given is kept)."""
    return {**given, **{k: v for k, v in defaults.items() if given.get(k) in (None, "")}}


def _defaulted_container(container: JsonObj, *, pod_container: bool, host_network: bool) -> JsonObj:
    """SetDefaults_Container; for an app or init container (``pod_container``) SetDefaults_Pod's too."""
    out = _filled(
        container,
        {
            "imagePullPolicy": _pull_policy(container.get("image")),
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        },
    )
    requests, limits = _requirements(container)
    if pod_container and limits and any(name not in requests for name in limits):
        out["resources"] = {**out["resources"], "requests": {**limits, **requests}}
    ports = container.get("ports")
    if isinstance(ports, list):
        out["ports"] = [
            _defaulted_port(p, pod_container and host_network) if isinstance(p, dict) else p for p in ports
        ]
    return out


def _defaulted_port(port: JsonObj, host_network: bool) -> JsonObj:
    out = _filled(port, {"protocol": "TCP"})
    if host_network and not port.get("hostPort") and port.get("containerPort") is not None:
        out["hostPort"] = port["containerPort"]
    return out


def _aggregate(spec: JsonObj, pick: int) -> dict[str, Fraction]:
    """What the containers ask together (component-helpers ``AggregateContainerRequests`` on the spec,
    ``pick`` 0 for requests and 1 for limits): the app containers and sidecars (restartable init
    containers) add up; an init container needs, while it runs, itself plus the sidecars started
    before it; the pod the larger of the two, per resource."""
    total: dict[str, Fraction] = {}
    for container in _containers(spec, "containers"):
        _add(total, _amounts(_requirements(container)[pick]))
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for container in _containers(spec, "initContainers"):
        own = _amounts(_requirements(container)[pick])
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            running = sidecars
        else:
            running = dict(own)
            _add(running, sidecars)
        for name, amount in running.items():
            peak[name] = max(peak.get(name, amount), amount)
    for name, amount in peak.items():
        total[name] = max(total.get(name, amount), amount)
    return total


def _add(into: dict[str, Fraction], amounts: dict[str, Fraction]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _pod_level(name: str) -> bool:
    return name in _QOS_RESOURCES or name.startswith("hugepages-")


def _shown(amount: Fraction) -> str:
    """An amount as a quantity string: milli units when not whole, the largest binary suffix that
    divides it (``2Gi``), else plain."""
    if amount.denominator != 1:
        return f"{int(amount * 1000)}m"
    whole = int(amount)
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SCALE[suffix])
        if whole and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def _pod_requests(spec: JsonObj) -> JsonObj | None:
    """``defaultPodRequests``: only with pod-level limits set, a pod-level request left out is the
    containers' aggregate request for it (CPU and memory) or else the pod-level limit (None: no change)."""
    requests, limits = _requirements(spec)
    if not limits:
        return None
    out = dict(requests)
    for name, amount in _aggregate(spec, 0).items():
        if name not in out and name in _QOS_RESOURCES:
            out[name] = _shown(amount)
    for name, limit in limits.items():
        if name not in out and _pod_level(name):
            out[name] = limit
    return out if out != requests else None


def with_defaults(obj: JsonObj) -> JsonObj:
    """``obj`` with the v1 defaults of a Pod filled in (a spec that is no object is left to validation)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    out = _filled(
        spec,
        {
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
            "schedulerName": "default-scheduler",
            "enableServiceLinks": True,
        },
    )
    grace = out.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool) and grace < 0:
        out["terminationGracePeriodSeconds"] = 1  # the 1.27 conversion of a Pod's (kubernetes#115606)
    host_network = spec.get("hostNetwork") is True
    for field in _CONTAINER_LISTS:
        pod_container = field != "ephemeralContainers"
        if isinstance(spec.get(field), list):
            out[field] = [
                _defaulted_container(c, pod_container=pod_container, host_network=host_network)
                if isinstance(c, dict)
                else c
                for c in spec[field]
            ]
    pod_requests = _pod_requests(out)
    if pod_requests is not None:
        out["resources"] = {**out["resources"], "requests": pod_requests}
    return {**obj, "spec": out}


# --- validation of resource quantities ----------------------------------------------------------------

#: where a kind's pod spec is: a Pod's ``spec``, a PodTemplate's ``template.spec``
POD_SPECS: dict[str, tuple[str, ...]] = {"Pod": ("spec",), "PodTemplate": ("template", "spec")}


def _extended(name: str) -> bool:
    """``helper.IsExtendedResourceName``: a name with a domain that is not native (``kubernetes.io``)
    nor a quota's ``requests.`` form, ``nvidia.com/gpu``; every such resource is an integer resource
    (``helper.IsIntegerResourceName``)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _overcommittable(name: str) -> bool:
    """``helper.IsOvercommitAllowed``: a native resource (no domain, or ``kubernetes.io``'s) but huge
    pages: its request may be below its limit, and needs none."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


_DECIMAL_SUFFIX = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_EXPONENT = re.compile(r"[0-9.][eE][-+]?[0-9]+$")  # 1e3 (DecimalExponent), not the exa suffix of 2E


def canonical(value: Any) -> str:
    """A quantity as ``Quantity.String()`` writes it (``CanonicalizeBytes``): one given in a binary suffix
    as the largest binary suffix that divides it (at least 1024, whole), else in milli units when not
    whole, else with the largest decimal suffix (``DecimalSI``) or exponent (``e3``) that divides it."""
    amount = quantity(value)
    text = str(value).strip()
    binary = text[-2:] in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
    if binary and amount.denominator == 1 and abs(amount) >= 1024:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = int(_SCALE[suffix])
            if amount % unit == 0:
                return f"{int(amount) // unit}{suffix}"
        return str(int(amount))
    exponent_form = not binary and _EXPONENT.search(text) is not None
    if amount.denominator != 1:
        return f"{int(amount * 1000)}{'e-3' if exponent_form else 'm'}"
    whole, exponent = int(amount), 0
    while whole and whole % 1000 == 0 and exponent < 18:
        whole, exponent = whole // 1000, exponent + 3
    return f"{whole}{(f'e{exponent}' if exponent else '') if exponent_form else _DECIMAL_SUFFIX[exponent]}"


_LIMIT_REQUIRED = "Limit must be set for non overcommitable resources"


def _value_problems(path: str, name: str, value: Any) -> list[tuple[str, str]]:
    """``ValidateResourceQuantityValue``: no quantity below zero (``ValidateNonnegativeQuantity``), an
    integer resource's ``MilliValue()`` (rounded up) a multiple of 1000."""
    amount, shown = quantity(value), canonical(value)
    found = []
    if amount < 0:
        found.append((path, f'Invalid value: "{shown}": must be greater than or equal to 0'))
    if _extended(name) and amount.denominator != 1:
        found.append((path, f'Invalid value: "{shown}": must be an integer'))
    return found


def _container_problems(where: str, container: JsonObj) -> list[tuple[str, str]]:
    """``ValidateResourceRequirements`` on one container: each limit's value, then each request's and
    how it stands to its limit: a non-overcommittable resource's request needs its limit and must equal
    it; another's may not exceed it (the messages name the limit, as kubernetes writes them now)."""
    requests, limits = _requirements(container)
    found: list[tuple[str, str]] = []
    for name in sorted(limits):
        found += _value_problems(f"{where}.limits[{name}]", name, limits[name])
    for name in sorted(requests):
        found += _value_problems(f"{where}.requests[{name}]", name, requests[name])
        if name not in limits:
            if not _overcommittable(name):
                found.append((f"{where}.limits", f"Required value: {_LIMIT_REQUIRED}"))
            continue
        asked, limit = quantity(requests[name]), quantity(limits[name])
        said = f'Invalid value: "{canonical(requests[name])}": must be'
        if asked != limit and not _overcommittable(name):
            found.append((f"{where}.requests", f"{said} equal to {name} limit of {canonical(limits[name])}"))
        elif asked > limit:
            found.append(
                (
                    f"{where}.requests",
                    f"{said} less than or equal to {name} limit of {canonical(limits[name])}",
                )
            )
    return found


def requirement_problems(obj: JsonObj, kind: str) -> list[tuple[str, str]]:
    """(field, message) of every resource requirement of a container or init container of the kind's pod
    spec the API server refuses (``validateContainerResourceRequirements``, pkg/apis/core/validation),
    containers first: :func:`_container_problems`. A Pod's requests left out were copied from its limits
    first (:func:`with_defaults`); a PodTemplate's are not (SetDefaults_Pod is a Pod's alone)."""
    spec: Any = obj
    for key in POD_SPECS.get(kind, ("-",)):
        spec = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return []
    where = ".".join(POD_SPECS[kind])
    found: list[tuple[str, str]] = []
    for field in ("containers", "initContainers"):
        for index, container in enumerate(_containers(spec, field)):
            found += _container_problems(f"{where}.{field}[{index}].resources", container)
    return found


# --- QoS class ---------------------------------------------------------------------------------------


def qos_class(spec: JsonObj) -> str:
    """``ComputePodQOS`` on a defaulted spec: BestEffort when no CPU or memory is requested or limited
    anywhere; Guaranteed when every container (init containers too) limits both CPU and memory and the
    requests add up to the limits; else Burstable. Pod-level resources naming CPU, memory or huge pages
    (PodLevelResources, with its kubelet QoS fix) replace the containers'."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    pod_requests, pod_limits = _requirements(spec)
    if any(_pod_level(name) for name in (*pod_requests, *pod_limits)):
        holders = [spec]
    else:
        holders = _containers(spec, "containers") + _containers(spec, "initContainers")
    for holder in holders:
        given, capping = _requirements(holder)
        capped = _counted(_amounts(capping))
        _add(requests, _counted(_amounts(given)))
        _add(limits, capped)
        # a container must limit both; the pod level, only when it limits anything
        if (holder is not spec or capping) and not all(r in capped for r in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests.keys() == limits.keys() and all(limits[k] == v for k, v in requests.items()):
        return GUARANTEED
    return BURSTABLE


def _counted(amounts: dict[str, Fraction]) -> dict[str, Fraction]:
    """The amounts the QoS class looks at: CPU and memory above zero."""
    return {name: amount for name, amount in amounts.items() if name in _QOS_RESOURCES and amount > 0}


def pod_qos(status: JsonObj, spec: JsonObj) -> str:
    """``GetPodQOS``: the class a pod's status carries, else the one its spec gives."""
    given = status.get("qosClass")
    return given if isinstance(given, str) and given else qos_class(spec)


def resize_problem(current: JsonObj, updated: JsonObj) -> tuple[str, str] | None:
    """``ValidatePodResize``'s rule for a write changing a pod's resources: the class they give must stay
    the pod's (a write leaving the resources alone is no resize)."""
    old_spec, new_spec = current.get("spec") or {}, updated.get("spec") or {}
    if _resources(old_spec) == _resources(new_spec):
        return None
    kept = pod_qos(current.get("status") or {}, old_spec)
    if qos_class(new_spec) == kept:
        return None
    return "spec", f'Invalid value: "{kept}": Pod QOS Class may not change as a result of resizing'


def _resources(spec: JsonObj) -> list[Any]:
    return [spec.get("resources")] + [
        c.get("resources") for field in ("containers", "initContainers") for c in _containers(spec, field)
    ]


# --- default tolerations ---------------------------------------------------------------------------

#: the taints DefaultTolerationSeconds tolerates for a pod by default (k8s.io/api core/v1
#: ``TaintNodeNotReady``, ``TaintNodeUnreachable``), each for the plugin's default 300 s
DEFAULT_TOLERATED = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
DEFAULT_TOLERATION_SECONDS = 300


def _tolerates_no_execute(toleration: Any, key: str) -> bool:
    """The plugin's test: the toleration's key is ``key`` or empty, its effect NoExecute or empty (its
    operator is not looked at)."""
    if not isinstance(toleration, dict):
        return False
    return toleration.get("key") in (key, "", None) and toleration.get("effect") in ("NoExecute", "", None)


def admit_default_tolerations(spec: JsonObj) -> JsonObj:
    """DefaultTolerationSeconds on a pod's create or update: ``spec`` with a NoExecute toleration of
    each taint of :data:`DEFAULT_TOLERATED` it does not tolerate yet appended to its tolerations."""
    given = spec.get("tolerations")
    tolerations = list(given) if isinstance(given, list) else []
    added = [
        {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
        }
        for key in DEFAULT_TOLERATED
        if not any(_tolerates_no_execute(t, key) for t in tolerations)
    ]
    if not added or (given is not None and not isinstance(given, list)):
        return spec  # nothing to add, or tolerations that are no list (left to validation)
    return {**spec, "tolerations": tolerations + added}


# --- priority ------------------------------------------------------------------------------------------


def priority_class_defaults(obj: JsonObj) -> JsonObj:
    """``SetDefaults_PriorityClass``; ``value`` (an int32, no pointer) is 0 when left out or null."""
    out = dict(obj)
    if out.get("value") is None:
        out["value"] = 0
    if not out.get("preemptionPolicy"):
        out["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY
    return out


def check_priority_class(obj: JsonObj) -> KubeApiError | None:
    """A ``value`` that is no int32 does not decode (400 naming the field, as the decoder words it)."""
    value = obj.get("value")
    if isinstance(value, int) and not isinstance(value, bool) and value in _INT32:
        return None
    found = json_type(value)
    shown = {"boolean": "bool", "integer": f"number {value}", "number": f"number {value}"}.get(found, found)
    return _undecodable(
        "PriorityClass",
        f"json: cannot unmarshal {shown} into Go struct field PriorityClass.value of type int32",
    )


def _resolve(name: str, classes: Iterable[JsonObj]) -> tuple[str, int, str] | None:
    """The class name, value and preemption policy a pod naming ``name`` (or none) gets; None when no
    class of that name exists."""
    by_name = {(c.get("metadata") or {}).get("name"): c for c in classes}
    if name:
        found = by_name.get(name)
    else:
        defaults = [c for c in by_name.values() if c.get("globalDefault") is True]
        found = min(defaults, key=lambda c: c["value"], default=None)
        if found is None:
            return "", 0, PREEMPT_LOWER_PRIORITY
    if found is None:
        return None
    return found["metadata"]["name"], found["value"], found.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY


def admit_priority(spec: JsonObj, classes: Iterable[JsonObj], *, strict: bool) -> tuple[JsonObj, str | None]:
    """The Priority plugin on a pod's create: its spec with ``priority``, ``preemptionPolicy`` (and the
    default class's name) set, or why it is forbidden. Not ``strict`` (the seeding path, for pods
    already admitted), what the spec states is kept and only what it lacks is filled."""
    named = spec.get("priorityClassName")
    named = named if isinstance(named, str) else ""
    resolved = _resolve(named, classes)
    if resolved is None:
        if strict:
            return spec, f"no PriorityClass with name {named} was found"
        resolved = named, 0, PREEMPT_LOWER_PRIORITY
    name, value, policy = resolved
    stated, stated_policy = spec.get("priority"), spec.get("preemptionPolicy")
    if strict and stated is not None and stated != value:
        return spec, (
            f"the integer value of priority ({stated}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name"
        )
    if strict and stated_policy is not None and stated_policy != policy:
        return spec, (
            f"the string value of PreemptionPolicy ({stated_policy}) must not be provided in pod "
            f"spec; priority admission controller computed {policy} from the given PriorityClass name"
        )
    out = {**spec, "preemptionPolicy": stated_policy or policy}
    if strict or stated is None:  # a seeded pod's stated priority is kept, and its class left as it is
        out["priority"] = value
        if name:
            out["priorityClassName"] = name
    return out, None
