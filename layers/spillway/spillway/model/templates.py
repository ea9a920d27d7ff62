"""Pods that do not exist yet, given the cluster's pod topology: a buffer's chunk and a
ProvisioningRequest's pod sets are shaped by a PodTemplate, and are placed as a pending pod of that
template would be. Their own anti-affinity and spread terms, and the cluster's terms that select them,
are matched in the one :meth:`~spillway.model.cluster.TopologyMatcher.apply` of the snapshot's pods
(term ids are the snapshot's). A buffer's chunk and a request's pods also get what their volumes say
(:meth:`~spillway.model.cluster.VolumeMatcher.template`): where their claims let them run, and the
volumes they bring against each CSI driver's attach limit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from spillway.model.buffer import BufferInfo
from spillway.model.cluster import PodInfo, TopologyMatcher, VolumeMatcher
from spillway.model.k8s import Pod
from spillway.model.provreq import PodSetInfo, ProvisioningRequestInfo


def with_topology(
    topology: TopologyMatcher,
    pods: list[PodInfo],
    namespaces: Mapping[str, Mapping[str, str]] | None,
    buffers: Sequence[BufferInfo] = (),
    provreqs: Sequence[ProvisioningRequestInfo] = (),
    volumes: VolumeMatcher | None = None,
) -> tuple[tuple[PodInfo, ...], tuple[BufferInfo, ...], tuple[ProvisioningRequestInfo, ...]]:
    """The cluster's pods, the buffers and the ProvisioningRequests, each template's pod with its pod
    topology: a buffer of a one-per-node Deployment holds room on as many nodes as chunks, and a request
    whose workers repel each other books one per node, as the replicas would run. ``topology`` has
    remembered the cluster's pods (indexes in ``pods``); a template whose Pod is not known (a stored
    snapshot's) keeps its pod as it is. ``volumes`` has read the cluster's claims, volumes and
    classes: the buffers' chunks and the requests' pods get their volumes' terms and attach counts from
    it. A chunk is a fake pod cluster-autoscaler injects among the unschedulable pods
    (processors/capacitybuffer/pod_list_processor.go), which its scale-up simulation runs through
    kube-scheduler's filters as any pending pod, VolumeBinding, VolumeZone and NodeVolumeLimits among
    them."""
    if volumes is not None:
        buffers = [_buffer_with_volumes(volumes, b) for b in buffers]
        provreqs = [
            replace(r, pod_sets=tuple(_with_volumes(volumes, s) for s in r.pod_sets)) for r in provreqs
        ]
    templates: list[PodInfo] = []
    for pod, source in _templates(buffers, provreqs):
        if pod is not None and source is not None:
            topology.remember(len(pods) + len(templates), source)
            templates.append(pod)
    out = topology.apply([*pods, *templates], namespaces)
    given = iter(out[len(pods) :])

    def take(pod: PodInfo | None, source: Pod | None) -> PodInfo | None:
        return next(given) if pod is not None and source is not None else pod

    new_buffers = tuple(replace(b, pod=take(b.pod, b.source)) for b in buffers)
    new_requests = tuple(
        replace(r, pod_sets=tuple(replace(s, pod=take(s.pod, s.source)) for s in r.pod_sets))
        for r in provreqs
    )
    return out[: len(pods)], new_buffers, new_requests


def _buffer_with_volumes(volumes: VolumeMatcher, buffer: BufferInfo) -> BufferInfo:
    if buffer.pod is None or buffer.source is None:
        return buffer
    return replace(buffer, pod=volumes.template(buffer.pod, buffer.source))


def _with_volumes(volumes: VolumeMatcher, pod_set: PodSetInfo) -> PodSetInfo:
    if pod_set.pod is None or pod_set.source is None:
        return pod_set
    return replace(pod_set, pod=volumes.template(pod_set.pod, pod_set.source))


def _templates(
    buffers: Sequence[BufferInfo], provreqs: Sequence[ProvisioningRequestInfo]
) -> Iterator[tuple[PodInfo | None, Pod | None]]:
    """Each template's pod and Pod, in the order :func:`with_topology` gives them back."""
    for buffer in buffers:
        yield buffer.pod, buffer.source
    for request in provreqs:
        for pod_set in request.pod_sets:
            yield pod_set.pod, pod_set.source
