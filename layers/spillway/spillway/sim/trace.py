"""Workload traces: Philly's job digest and a generic CSV, read into jobs of pods.

Two formats, told apart by the header line:

* **Philly** (``timestamp,duration,num_gpus,gpu_time,cluster``), the job-level digest of the Microsoft
  Philly trace as published with the Pollux artifact. One row is one job asking for ``num_gpus`` GPUs
  in total; it has no CPU or memory columns.
* **generic** (``submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority``): one row is one
  job of ``count`` identical pods that start together, each asking for ``cpu`` (a Kubernetes quantity
  or a number of cores), ``memory_gib`` and ``gpus``. ``submit_time`` is seconds from the start of the
  trace or an ISO-8601 time. ``cpu`` and ``memory_gib`` may be left empty on a GPU row.

A GPU row without CPU and memory gets, per GPU, the node type's allocatable CPU and memory divided by
its GPUs, rounded down to 100m and to 1 GiB (a little under, so that a full node of GPUs still fits
beside the system reserve). The node type is the first of the groups' with GPUs (for a generic row,
the first whose node holds one of its pods), whatever groups come before it. A Philly job larger
than one node becomes one pod per node's worth of GPUs (32 GPUs on 8-GPU nodes: 4 pods of 8) that
start together; see ``spillway.sim.world`` for the gang rule. Rows are read into :class:`TraceRow`
(what the file says) and turned into :class:`Job` (pods with requests) by :func:`build_jobs` once the
node types are known.

Bad input raises :class:`TraceError`, whose message names the file, the line and the column; so does a
job the groups could never start, all at their MaxSize (:func:`build_jobs` with the groups' room).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from spillway.errors import InputError
from spillway.model.quantity import MAX_VALUE, QuantityError, to_milli
from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, PODS, Resources
from spillway.model.utc import aware

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
GENERIC_COLUMNS = ("submit_time", "duration", "cpu", "memory_gib", "gpus", "count", "namespace", "priority")
GIB_MILLI = 2**30 * 1000
_CPU_STEP = 100  # milli-CPU
_ONE_POD = 1000
# A Namespace's name: an RFC 1123 label (k8s.io/apimachinery pkg/util/validation IsDNS1123Label).
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_MAX = 63
# Where relative submit times start when a generic trace gives seconds, not times.
DEFAULT_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class TraceError(InputError):
    """A trace file that cannot be read; the message names the file, the line and the column."""


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One row as the file says it (per-pod requests; ``None`` where the trace has no column)."""

    line: int
    submit: datetime
    duration: int  # seconds, at least 1
    cpu_milli: int | None
    memory_milli: int | None
    gpus: int
    count: int
    namespace: str
    priority: int
    split_by_node: bool  # Philly: ``gpus`` is the job's total, split into one pod per node's worth


@dataclass(frozen=True, slots=True)
class Job:
    """A job of pods that start together (all or none) and run for ``duration`` seconds."""

    id: int
    name: str
    namespace: str
    submit: int  # seconds from the trace epoch
    duration: int
    priority: int
    pods: tuple[Resources, ...]  # each pod's requests, milli-units, with the "pods" slot
    movable: bool = False  # its pods are marked safe-to-evict: "true" (--movable-fraction)
    expected: int | None = None  # the duration as it is known beforehand (--duration-noise), seconds

    @property
    def gpus(self) -> int:
        return sum(p.get(NVIDIA_GPU, 0) for p in self.pods) // 1000

    def total(self, resource: str) -> int:
        return sum(p.get(resource, 0) for p in self.pods)


@dataclass(frozen=True, slots=True)
class Trace:
    rows: tuple[TraceRow, ...]
    format: str
    source: str

    @property
    def epoch(self) -> datetime:
        return min((r.submit for r in self.rows), default=DEFAULT_EPOCH)


def read_trace(path: str | Path, fmt: str = "auto", limit: int | None = None) -> Trace:
    """Read a Philly or generic CSV trace (``fmt``: ``auto``, ``philly`` or ``generic``).

    ``limit`` keeps the first ``limit`` jobs by submit time.
    """
    source = str(path)
    try:
        # utf-8-sig: a byte order mark (Excel's "CSV UTF-8") is no part of the first column's name
        handle = open(path, newline="", encoding="utf-8-sig")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise TraceError(exc.strerror or str(exc), source=source) from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise TraceError("empty file: expected a header line", source=source)
        columns = tuple(h.strip() for h in header)
        if fmt == "auto":
            fmt = "philly" if set(columns) == set(PHILLY_COLUMNS) else "generic"
        if fmt == "philly":
            rows = _read_philly(reader, columns, source)
        elif fmt == "generic":
            rows = _read_generic(reader, columns, source)
        else:
            raise TraceError(f"unknown trace format {fmt!r} (philly, generic or auto)", source=source)
    rows.sort(key=lambda r: (r.submit, r.line))
    if limit is not None:
        rows = rows[: max(0, limit)]
    return Trace(rows=tuple(rows), format=fmt, source=source)


def _columns_index(columns: Sequence[str], wanted: Sequence[str], source: str) -> dict[str, int]:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise TraceError(
            f"missing column(s) {', '.join(missing)}; expected {','.join(wanted)}",
            source=source,
            field="line 1",
        )
    unknown = [c for c in columns if c not in wanted]
    if unknown:
        raise TraceError(
            f"unknown column(s) {', '.join(unknown)}; expected {','.join(wanted)}",
            source=source,
            field="line 1",
        )
    return {c: columns.index(c) for c in wanted}


class _Row:
    """Field access for one CSV row, with errors that name the line and the column."""

    def __init__(self, values: list[str], index: dict[str, int], line: int, source: str) -> None:
        if len(values) != len(index):
            raise TraceError(
                f"expected {len(index)} fields, found {len(values)}", source=source, field=f"line {line}"
            )
        self.values = values
        self.index = index
        self.line = line
        self.source = source

    def raw(self, column: str) -> str:
        return self.values[self.index[column]].strip()

    def fail(self, column: str, message: str) -> TraceError:
        return TraceError(message, source=self.source, field=f"line {self.line}, column {column}")

    def number(self, column: str, *, minimum: float | None = None, above: float | None = None) -> float:
        text = self.raw(column)
        try:
            value = float(text)
        except ValueError:
            raise self.fail(column, f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise self.fail(column, f"not a finite number: {text!r}")
        if minimum is not None and value < minimum:
            raise self.fail(column, f"must be at least {minimum:g}, got {text}")
        if above is not None and value <= above:
            raise self.fail(column, f"must be greater than {above:g}, got {text}")
        return value

    def integer(self, column: str, *, minimum: int | None = None) -> int:
        text = self.raw(column)
        try:
            value = int(text)
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                raise self.fail(column, f"not an integer: {text!r}") from None
            if not as_float.is_integer():
                raise self.fail(column, f"not an integer: {text!r}") from None
            value = int(as_float)
        if minimum is not None and value < minimum:
            raise self.fail(column, f"must be at least {minimum}, got {text}")
        return value

    def namespace(self, column: str, name: str) -> str:
        """``name`` when a Namespace may be called so (an RFC 1123 label, as the API server's
        ValidateNamespaceName wants), else an error naming the column."""
        if len(name) > _LABEL_MAX or not _LABEL.fullmatch(name):
            raise self.fail(
                column,
                f"namespace {name!r} is no RFC 1123 label (lower-case letters, digits and '-', "
                f"starting and ending alphanumeric, at most {_LABEL_MAX})",
            )
        return name

    def time(self, column: str) -> datetime:
        text = self.raw(column)
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise self.fail(column, f"not a time (YYYY-mm-dd HH:MM:SS): {text!r}") from None
        return aware(value)


def _duration(row: _Row) -> int:
    return max(1, math.ceil(row.number("duration", above=0)))


def _records(reader: Any) -> Iterator[tuple[int, list[str]]]:
    """Each record of a csv reader past the header, with the file line it starts on: a quoted field may
    hold a line break, so a record can span lines (``line_num`` counts lines, not records)."""
    start = reader.line_num + 1
    for values in reader:
        yield start, values
        start = reader.line_num + 1


def _read_philly(reader: Any, columns: Sequence[str], source: str) -> list[TraceRow]:
    index = _columns_index(columns, PHILLY_COLUMNS, source)
    rows: list[TraceRow] = []
    for line, values in _records(reader):
        if not values or (len(values) == 1 and not values[0].strip()):
            continue
        row = _Row(values, index, line, source)
        cluster = row.raw("cluster")
        if not cluster:
            raise row.fail("cluster", "empty")
        rows.append(
            TraceRow(
                line=line,
                submit=row.time("timestamp"),
                duration=_duration(row),
                cpu_milli=None,
                memory_milli=None,
                gpus=row.integer("num_gpus", minimum=1),
                count=1,
                namespace=row.namespace("cluster", f"vc-{cluster}"),
                priority=0,
                split_by_node=True,
            )
        )
    return rows


def _read_generic(reader: Any, columns: Sequence[str], source: str) -> list[TraceRow]:
    index = _columns_index(columns, GENERIC_COLUMNS, source)
    rows: list[TraceRow] = []
    for line, values in _records(reader):
        if not values or (len(values) == 1 and not values[0].strip()):
            continue
        row = _Row(values, index, line, source)
        text = row.raw("submit_time")
        try:
            seconds = float(text)
        except ValueError:
            submit = row.time("submit_time")
        else:
            if not math.isfinite(seconds) or seconds < 0:
                raise row.fail("submit_time", f"must be a time or seconds at least 0, got {text!r}")
            try:
                submit = DEFAULT_EPOCH + timedelta(seconds=seconds)
            except OverflowError:
                raise row.fail(
                    "submit_time",
                    f"{text} seconds from the start is past the year 9999 (seconds, not milliseconds)",
                ) from None
        cpu: int | None = None
        cpu_text = row.raw("cpu")
        if cpu_text:
            try:
                cpu = to_milli(cpu_text)
            except QuantityError:
                raise row.fail("cpu", f"not a CPU quantity: {cpu_text!r}") from None
            if cpu < 0:
                raise row.fail("cpu", f"must not be negative, got {cpu_text}")
        memory: int | None = None
        if row.raw("memory_gib"):
            gib = row.number("memory_gib", minimum=0)
            if gib * 2**30 > MAX_VALUE:  # a quantity holds at most 2^63-1 bytes
                raise row.fail(
                    "memory_gib",
                    f"more memory than a quantity holds (2^63-1 bytes), got {row.raw('memory_gib')}",
                )
            memory = math.ceil(gib * GIB_MILLI)
        gpus = row.integer("gpus", minimum=0) if row.raw("gpus") else 0
        if (cpu is None or memory is None) and gpus == 0:
            missing = "cpu" if cpu is None else "memory_gib"
            raise row.fail(missing, "empty on a row without GPUs (only GPU rows take the node's share)")
        namespace = row.namespace("namespace", row.raw("namespace") or "default")
        priority = row.integer("priority") if row.raw("priority") else 0
        rows.append(
            TraceRow(
                line=line,
                submit=submit,
                duration=_duration(row),
                cpu_milli=cpu,
                memory_milli=memory,
                gpus=gpus,
                count=row.integer("count", minimum=1),
                namespace=namespace,
                priority=priority,
                split_by_node=False,
            )
        )
    return rows


def gpu_share(allocatable: Resources) -> Resources:
    """One GPU's share of a GPU node's CPU and memory, rounded down (100m, 1 GiB)."""
    gpus = allocatable.get(NVIDIA_GPU, 0) // 1000
    if gpus <= 0:
        return {}
    cpu = allocatable.get(CPU, 0) // gpus // _CPU_STEP * _CPU_STEP
    memory = allocatable.get(MEMORY, 0) // gpus // GIB_MILLI * GIB_MILLI
    return {CPU: cpu, MEMORY: memory}


def sizing_type(row: TraceRow, fleet: Sequence[Resources]) -> Resources | None:
    """The node type a row's pods are sized on, of the fleet's (allocatable room, in the groups' order):
    for a GPU row the first type with GPUs, or, for a generic row (its GPUs are per pod), the first
    whose node holds one of its pods when one does; None for a row without GPUs (it says its CPU and
    memory) or when no type has GPUs."""
    if not row.gpus:
        return None
    with_gpus = [t for t in fleet if t.get(NVIDIA_GPU, 0) > 0]
    if not row.split_by_node:
        holding = [t for t in with_gpus if t[NVIDIA_GPU] >= row.gpus * 1000]
        with_gpus = holding or with_gpus
    return with_gpus[0] if with_gpus else None


def build_jobs(
    trace: Trace, fleet: Resources | Sequence[Resources], room: Resources | None = None
) -> list[Job]:
    """Jobs of pods for the fleet's node types: their allocatable room (milli-units) in the groups'
    order, or one type's. Each row is sized on the type :func:`sizing_type` picks, whatever the order
    (the order is a region preference): a CPU group listed first does not size a GPU trace.

    ``room``: what the groups hold at once, each at its MaxSize (their nodes' allocatable summed). A row
    whose job could never start there is refused before its pods are built (:func:`_never_starts`).

    Submit times are seconds from the trace epoch (the earliest submit).
    """
    types = [fleet] if isinstance(fleet, Mapping) else list(fleet)
    epoch = trace.epoch
    jobs: list[Job] = []
    for i, row in enumerate(trace.rows):
        node_type = sizing_type(row, types)
        share = gpu_share(node_type) if node_type is not None else {}
        if (row.cpu_milli is None or row.memory_milli is None) and not share:
            raise TraceError(
                "a GPU row without cpu or memory takes each GPU's share from a node type, "
                "but no node type has GPUs",
                source=trace.source,
                field=f"line {row.line}",
            )
        per_node = node_type.get(NVIDIA_GPU, 0) // 1000 if node_type is not None else 0
        if room is not None:
            _never_starts(row, share, per_node, types, room, trace.source)
        if row.split_by_node and per_node > 0:
            sizes = [per_node] * (row.gpus // per_node) + (
                [row.gpus % per_node] if row.gpus % per_node else []
            )
        else:
            sizes = [row.gpus] * row.count
        pods: list[Resources] = []
        for gpus in sizes:
            cpu = row.cpu_milli if row.cpu_milli is not None else share[CPU] * gpus
            memory = row.memory_milli if row.memory_milli is not None else share[MEMORY] * gpus
            request: Resources = {CPU: cpu, MEMORY: memory, PODS: _ONE_POD}
            if gpus:
                request[NVIDIA_GPU] = gpus * 1000
            pods.append(request)
        submit = round((row.submit - epoch).total_seconds())
        jobs.append(
            Job(
                id=i,
                name=f"job-{i:06d}",
                namespace=row.namespace,
                submit=submit,
                duration=row.duration,
                priority=row.priority,
                pods=tuple(pods),
            )
        )
    return jobs


# How a resource of a job's need reads in the error, its milli-units per unit, and the generic column
# that asks for it per pod.
_NEEDS = (
    (NVIDIA_GPU, "GPUs", 1000, "gpus"),
    (CPU, "CPUs", 1000, "cpu"),
    (MEMORY, "GiB of memory", GIB_MILLI, "memory_gib"),
    (PODS, "pods", _ONE_POD, "count"),
)


def _job_size(row: TraceRow, share: Resources, per_node: int) -> tuple[int, Resources, Resources]:
    """The job a row makes, without building its pods: how many pods, the largest pod's requests, and
    all its pods' requests together (as :func:`build_jobs` builds them: a row's cpu and memory are per
    pod, a GPU's share per GPU)."""
    if row.split_by_node and per_node > 0:
        pods, largest, gpus = -(-row.gpus // per_node), min(per_node, row.gpus), row.gpus
    else:
        pods, largest, gpus = row.count, row.gpus, row.gpus * row.count
    one: Resources = {NVIDIA_GPU: largest * 1000, PODS: _ONE_POD}
    total: Resources = {NVIDIA_GPU: gpus * 1000, PODS: pods * _ONE_POD}
    for resource, per_pod in ((CPU, row.cpu_milli), (MEMORY, row.memory_milli)):
        if per_pod is None:
            one[resource], total[resource] = share[resource] * largest, share[resource] * gpus
        else:
            one[resource], total[resource] = per_pod, per_pod * pods
    return pods, one, total


def _never_starts(
    row: TraceRow, share: Resources, per_node: int, types: Sequence[Resources], room: Resources, source: str
) -> None:
    """Refuse (:class:`TraceError`, naming the line and the column) a row whose job could never start on
    the groups at their MaxSize: its pods start together (the gang rule of ``spillway.sim.world``), so
    one that needs more of a resource than they hold all at once would wait to the replay's horizon,
    counted in the lower bound as work the fleet could do; and one of more pods than they have room for
    is no job any cluster of them could schedule, whose pods (10^8 of them) could not be built in any
    reasonable time. A job with a pod no group's node holds is left as it is (it never starts, and is
    counted apart) unless it has more pods than that."""
    pods, one, total = _job_size(row, share, per_node)
    holds_one = any(all(t.get(r, 0) >= v for r, v in one.items()) for t in types)
    for resource, label, unit, column in _NEEDS:
        if total[resource] <= room.get(resource, 0) or (not holds_one and resource != PODS):
            continue
        if row.split_by_node:
            column = "num_gpus"
        elif resource != PODS and one[resource] <= room.get(resource, 0):
            column = "count"  # each pod fits; there are too many of them
        raise TraceError(
            f"a job of {pods:,} pod(s) that start together needs {total[resource] / unit:,.0f} {label}, "
            f"more than the groups hold at their MaxSize ({room.get(resource, 0) / unit:,.0f}): no policy "
            "could ever start it; raise --max-nodes or a --group's MAX, or leave the row out",
            source=source,
            field=f"line {row.line}, column {column}",
        )
