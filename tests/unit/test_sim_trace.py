"""Reading traces for `spillway simulate`, and the lower bounds computed from them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from spillway.sim.bounds import lower_bounds
from spillway.sim.trace import TraceError, build_jobs, gpu_share, read_trace
from spillway.sim.world import GroupSpec, group_template

REPO = Path(__file__).resolve().parents[2]
PHILLY = REPO.parent / "shared" / "traces" / "philly.csv"
GIB = 2**30 * 1000
GENERIC = "submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority\n"


def p3_allocatable() -> dict[str, int]:
    template = group_template(GroupSpec("g", "us-east-1", "p3.16xlarge"), {"cpu": 100, "memory": GIB}, "sim")
    return dict(template.allocatable)


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_gpu_share_is_a_little_under_a_gpu_s_part_of_the_node() -> None:
    alloc = p3_allocatable()  # 64 vCPU - 100m, 488 GiB - 1 GiB, 8 GPUs
    share = gpu_share(alloc)
    assert share == {"cpu": 7900, "memory": 60 * GIB}
    assert 8 * share["cpu"] <= alloc["cpu"] and 8 * share["memory"] <= alloc["memory"]


@pytest.mark.skipif(not PHILLY.exists(), reason="../shared/traces/philly.csv is not here")
def test_philly_first_rows_of_the_real_file(tmp_path: Path) -> None:
    # The header and the first 40 jobs of ../shared/traces/philly.csv (Philly trace digest, Pollux artifact).
    with PHILLY.open() as handle:
        head = [next(handle) for _ in range(41)]
    trace = read_trace(write(tmp_path, "".join(head)))
    assert trace.format == "philly"
    assert len(trace.rows) == 40
    first_line = next(r for r in trace.rows if r.line == 2)  # 2017-10-09 07:01:55,66.0,1,66.0,11cb48
    assert first_line.submit == datetime(2017, 10, 9, 7, 1, 55, tzinfo=UTC)
    assert (first_line.duration, first_line.gpus, first_line.namespace) == (66, 1, "vc-11cb48")
    assert first_line.cpu_milli is None and first_line.memory_milli is None
    # rows come out by submit time; the earliest is the epoch
    assert [r.submit for r in trace.rows] == sorted(r.submit for r in trace.rows)
    jobs = build_jobs(trace, p3_allocatable())
    assert jobs[0].submit == 0
    one = next(j for j in jobs if j.name == f"job-{trace.rows.index(first_line):06d}")
    assert one.pods == ({"cpu": 7900, "memory": 60 * GIB, "pods": 1000, "nvidia.com/gpu": 1000},)


def test_philly_jobs_larger_than_a_node_become_one_pod_per_node(tmp_path: Path) -> None:
    text = (
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:00:00,100.0,32,3200.0,aa\n"
        "2017-10-01 00:00:10,100.5,12,1206.0,bb\n"
    )
    jobs = build_jobs(read_trace(write(tmp_path, text)), p3_allocatable())
    assert [[p["nvidia.com/gpu"] // 1000 for p in j.pods] for j in jobs] == [[8, 8, 8, 8], [8, 4]]
    assert [j.pods[-1]["cpu"] for j in jobs] == [8 * 7900, 4 * 7900]
    assert [(j.submit, j.duration, j.gpus) for j in jobs] == [(0, 100, 32), (10, 101, 12)]


def test_generic_csv_rows(tmp_path: Path) -> None:
    text = GENERIC + (
        "0,600,500m,2,0,3,web,5\n"  # 3 CPU pods that start together
        "30.5,60,4,16,1,1,ml,0\n"  # explicit CPU and memory beside a GPU
        "2026-01-01T00:02:00Z,60,,,2,1,,\n"  # GPU only: the node's share; namespace and priority defaulted
    )
    trace = read_trace(write(tmp_path, text))
    assert trace.format == "generic"
    jobs = build_jobs(trace, p3_allocatable())
    web, ml, gpu = jobs
    assert web.pods == ({"cpu": 500, "memory": 2 * GIB, "pods": 1000},) * 3
    assert (web.namespace, web.priority) == ("web", 5)
    assert ml.submit == 30 and ml.pods[0] == {
        "cpu": 4000,
        "memory": 16 * GIB,
        "pods": 1000,
        "nvidia.com/gpu": 1000,
    }
    assert gpu.submit == 120 and gpu.namespace == "default"
    assert gpu.pods[0]["cpu"] == 2 * 7900 and gpu.pods[0]["memory"] == 120 * GIB


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("0,600,abc,1,0,1,ns,0", "line 3, column cpu: not a CPU quantity: 'abc'"),
        ("0,-5,1,1,0,1,ns,0", "line 3, column duration: must be greater than 0"),
        ("0,600,1,1,0,0,ns,0", "line 3, column count: must be at least 1"),
        ("0,600,1,1,1.5,1,ns,0", "line 3, column gpus: not an integer: '1.5'"),
        ("yesterday,600,1,1,0,1,ns,0", "line 3, column submit_time: not a time"),
        ("0,600,,,0,1,ns,0", "line 3, column cpu: empty on a row without GPUs"),
        ("0,600,1,1,0,1", "line 3: expected 8 fields, found 6"),
        # milliseconds since 1970 where seconds from the start belong: past any date (OverflowError before)
        ("1700000000000,600,1,1,0,1,ns,0", "line 3, column submit_time: 1700000000000 seconds"),
        ("1e20,600,1,1,0,1,ns,0", "line 3, column submit_time: 1e20 seconds"),
        ("0,600,1,1e308,0,1,ns,0", "line 3, column memory_gib: more memory than a quantity holds"),
    ],
)
def test_generic_csv_bad_row_names_the_line_and_the_column(tmp_path: Path, row: str, where: str) -> None:
    path = write(tmp_path, GENERIC + "0,60,1,1,0,1,ns,0\n" + row + "\n")
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(err.value).startswith(f"{path}: {where}")


def test_a_wrong_header_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "submit_time,duration,cpus,memory_gib,gpus,count,namespace,priority\n")
    with pytest.raises(TraceError, match=r"line 1: missing column\(s\) cpu"):
        read_trace(path)


def test_step_lower_bound_by_hand(tmp_path: Path) -> None:
    # 4 GPUs over [0, 3600), 8 over [1800, 5400), 1 over [1800, 3600), on 8-GPU nodes:
    #   [0, 1800)    4 GPUs -> 1 node
    #   [1800, 3600) 13     -> 2 nodes
    #   [3600, 5400) 8      -> 1 node
    # step = 1800 * (1 + 2 + 1) s = 2 node-hours; fluid = (4*3600 + 8*3600 + 1800) / 8 s = 1.5625 node-hours
    text = GENERIC + "0,3600,,,4,1,a,0\n1800,3600,,,8,1,a,0\n1800,1800,,,1,1,a,0\n"
    alloc = p3_allocatable()
    bounds = lower_bounds(build_jobs(read_trace(write(tmp_path, text)), alloc), alloc)
    assert bounds.step_node_hours == pytest.approx(2.0)
    assert bounds.fluid_node_hours == pytest.approx(1.5625)
    assert bounds.peak_nodes == 2
    assert (bounds.start, bounds.end, bounds.resource) == (0, 5400, "nvidia.com/gpu")


def test_step_lower_bound_follows_the_dominant_resource(tmp_path: Path) -> None:
    # m5.xlarge: 3.9 CPU and 15 GiB allocatable. Two pods of 1 CPU and 10 GiB: CPU alone would fit one
    # node, memory needs two.
    template = group_template(GroupSpec("c", "us-east-1", "m5.xlarge"), {"cpu": 100, "memory": GIB}, "sim")
    alloc = dict(template.allocatable)
    text = GENERIC + "0,3600,1,10,0,2,a,0\n"
    bounds = lower_bounds(build_jobs(read_trace(write(tmp_path, text)), alloc), alloc)
    assert bounds.step_node_hours == pytest.approx(2.0)
    assert bounds.resource == "memory"


def test_a_philly_digest_saved_with_a_utf8_bom_is_read_as_philly(tmp_path: Path) -> None:
    # Excel's "CSV UTF-8" and Windows PowerShell's Export-Csv start the file with a byte order mark;
    # read as part of the first column's name it made the header no Philly header, and the file was
    # refused as a generic trace missing its columns.
    path = tmp_path / "philly.csv"
    path.write_bytes(
        "\ufefftimestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,8,528.0,11cb48\n".encode()
    )
    trace = read_trace(path)
    assert trace.format == "philly"
    assert [(r.line, r.gpus, r.namespace) for r in trace.rows] == [(2, 8, "vc-11cb48")]


def test_a_bad_row_after_a_quoted_field_spanning_lines_is_named_by_its_own_line(tmp_path: Path) -> None:
    # A quoted field may hold a line break (RFC 4180): the record of line 2 ends on line 3, and the bad
    # row is on line 4 of the file, not the third record.
    path = write(tmp_path, GENERIC + '0,60,1,1,0,1,"ml\n",0\n0,60,lots,1,0,1,ml,0\n')
    with pytest.raises(TraceError, match=r"line 4, column cpu: not a CPU quantity: 'lots'"):
        read_trace(path)


@pytest.mark.parametrize(
    ("text", "column", "value"),
    [
        (GENERIC + "0,60,1,1,0,1,ml,0\n0,60,1,1,0,1,Team A,0\n", "namespace", "Team A"),
        (GENERIC + "0,60,1,1,0,1," + "n" * 64 + ",0\n", "namespace", "n" * 64),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11CB48\n",
            "cluster",
            "vc-11CB48",
        ),
    ],
)
def test_a_namespace_kubernetes_would_refuse_is_named_by_line_and_column(
    tmp_path: Path, text: str, column: str, value: str
) -> None:
    # A namespace's name is an RFC 1123 label (lower-case alphanumerics and '-', at most 63): the
    # simulated pods live there and a --config's tenants name it, so a row whose namespace no API server
    # would create is bad input, not a tenant the replay makes up.
    path = write(tmp_path, text)
    line = text.count("\n")
    with pytest.raises(TraceError, match=rf"line {line}, column {column}: .*{value}"):
        read_trace(path)
