"""`spillway simulate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spillway.cli import main

GENERIC = "submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority\n"


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    rows = [f"{i * 240},{1800 + 600 * (i % 3)},,,{(1, 2, 8)[i % 3]},1,ml,0" for i in range(12)]
    path = tmp_path / "small.csv"
    path.write_text(GENERIC + "\n".join(rows) + "\n")
    return path


def test_simulate_json(small_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            str(small_trace),
            "--json",
            "--no-progress",
            "--scheduler-scoring",
            "most-allocated",
            "--outage",
            "gpu-us-east-1=0/20m",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["policy"] for p in out["policies"]] == [
        "spillway",
        "static",
        "ec2-autoscaler",
        "cluster-autoscaler",
    ]
    assert out["trace"]["jobs"] == 12 and out["trace"]["format"] == "generic"
    assert out["config"]["scheduler_scoring"] == "most-allocated"
    assert out["config"]["outages"] == [{"group": "gpu-us-east-1", "start": 0, "end": 1200}]
    assert out["prices"]["usd_per_hour"] == {"p3.16xlarge": 24.48}
    assert "On-Demand" in out["prices"]["source"]
    bound = out["lower_bound"]["step_node_hours"]
    assert bound > 0
    for policy in out["policies"]:
        assert policy["pods_killed_by_scale_down"] == 0
        assert policy["jobs_never_started"] == 0
        assert policy["ratio_to_step_bound"] == pytest.approx(policy["node_hours"] / bound, rel=1e-3)
        assert set(policy["pending_added_gpu_weighted_seconds"]) == {"p50", "p90", "p99"}
    spillway = out["policies"][0]
    assert spillway["actions"]["failed_launch_calls"] >= 1  # it tried the primary during the outage
    assert set(spillway["node_hours_by_group"]) == {"gpu-us-east-1", "gpu-us-west-2"}


def test_simulate_json_is_the_same_for_the_same_seed(
    small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for _ in range(2):
        assert main(["simulate", str(small_trace), "--json", "--no-progress", "--seed", "3"]) == 0
        captured = capsys.readouterr()
        assert captured.err.startswith("replayed in ")  # wall times go to stderr, not into the report
        outputs.append(captured.out)
    assert outputs[0] == outputs[1]


def test_simulate_table_and_chart(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "chart.png"
    code = main(
        [
            "simulate",
            str(small_trace),
            "--policies",
            "spillway,static",
            "--chart",
            str(chart),
            "--no-progress",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "spillway" in out and "static" in out and "step lower bound" in out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_progress_goes_to_stderr(small_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(small_trace), "--policies", "spillway", "--progress", "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert "spillway" in captured.err and "100%" in captured.err


def test_simulate_bad_trace_row_exits_2_naming_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(GENERIC + "0,60,1,1,0,1,ns,0\n0,60,1,lots,0,1,ns,0\n")
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"spillway simulate: {path}: line 3, column memory_gib: not a number: 'lots'\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--outage", "nope=0/1h"], "--outage nope=0/1h: no group 'nope'"),
        (["--outage", "gpu-us-east-1=2h/1h"], "END must be after START"),
        # a number of more digits than a float holds is infinite: refused, not an OverflowError traceback
        (["--outage", f"gpu-us-east-1={'9' * 400}/1d"], f"--outage gpu-us-east-1={'9' * 400}/1d: not a time"),
        (["--outage", f"gpu-us-east-1=0/{'9' * 400}h"], "not a time"),
        (["--group", "just-a-name"], "--group just-a-name: expected NAME:REGION[:TYPE[:MIN:MAX]]"),
        (
            ["--group", "g:us-east-1:no-such.type"],
            "instance type 'no-such.type' is not in the bundled catalogue",
        ),
        (["--policies", "spillway,magic"], "unknown policy 'magic'"),
        (["--price", "p3.16xlarge=free"], "--price p3.16xlarge=free: expected TYPE=USD"),
    ],
)
def test_simulate_bad_arguments_exit_2(
    small_trace: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["simulate", str(small_trace), "--no-progress", *args]) == 2
    assert message in capsys.readouterr().err


# --- arguments refused up front, one line and exit 2, before any replay ----------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--limit", "-5"], "--limit: must be a positive number of jobs"),
        (["--limit", "0"], "--limit: must be a positive number of jobs"),
        (["--max-nodes", "0"], "--max-nodes: must be a positive number of nodes"),
        (["--policies", ""], "--policies: names no policy"),
        (["--policies", " , "], "--policies: names no policy"),
        (["--chart", "/tmp"], "--chart /tmp: is a directory"),
        (["--chart", "/nonexistent-dir/chart.png"], "no directory '/nonexistent-dir'"),
        (["--chart", "chart.gif"], "--chart chart.gif: unknown chart format '.gif'"),
        (["--chart", "chart"], "unknown chart format '(none)'"),
        (["--join-failure-rate", "1"], "--join-failure-rate: must be at least 0 and below 1, not 1.0"),
        (["--join-failure-rate", "-0.1"], "--join-failure-rate: must be at least 0 and below 1"),
        (["--join-failure-rate", "nan"], "--join-failure-rate: must be at least 0 and below 1"),
        (["--device-plugin-seconds", "-1"], "--device-plugin-seconds: must be a finite number 0 or more"),
        (["--duration-noise", "inf"], "--duration-noise: must be a finite number 0 or more"),
        (["--interval", "0"], "--interval: must be a finite number above 0"),
        (["--restart-penalty", "inf"], "--restart-penalty: must be a finite number 0 or more, minutes"),
        (["--restart-penalty", "1e308"], "--restart-penalty: more minutes than seconds can count"),
    ],
)
def test_bad_arguments_are_refused_before_the_replay(
    small_trace: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    expected: str,
) -> None:
    import spillway.sim.run

    def no_replay(*_: object, **__: object) -> None:
        raise AssertionError("the replay ran before the arguments were checked")

    monkeypatch.setattr(spillway.sim.run, "simulate", no_replay)
    code = main(["simulate", str(small_trace), "--no-progress", *extra])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and expected in err, err


def test_a_trace_of_random_bytes_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_bytes(GENERIC.encode() + b"\xff\xfe\x00\x81 not text\n")
    code = main(["simulate", str(trace), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.splitlines()) == 1 and f"{trace}: not UTF-8 text" in err


def test_a_chart_that_cannot_be_written_is_one_line(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import spillway.sim.chart

    def fail(path: object, *_: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(spillway.sim.chart, "write_chart", fail)
    chart = tmp_path / "c.png"
    code = main(["simulate", str(small_trace), "--no-progress", "--chart", str(chart)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [f"spillway simulate: --chart {chart}: Permission denied"]


def test_a_reader_that_goes_away_ends_the_command_quietly(
    small_trace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class ClosedPipe:
        def write(self, _: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["simulate", str(small_trace), "--no-progress", "--policies", "static"])
    assert code == 1
    assert capsys.readouterr().err == ""


# --- tenants: namespaces, limits from --config, a per-tenant report --------------------------------


@pytest.fixture
def two_tenants(tmp_path: Path) -> Path:
    rows = ["0,7300,,,8,1,team-b,0", "0,7300,,,8,1,team-b,0"] + ["0,3600,,,8,1,team-a,0"] * 3
    path = tmp_path / "tenants.csv"
    path.write_text(GENERIC + "\n".join(rows) + "\n")
    return path


def test_simulate_with_tenant_limits_reports_per_tenant(
    two_tenants: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "spillway.yaml"
    config.write_text("tenants:\n  team-a:\n    limits:\n      nvidia.com/gpu: 8\n")
    base = ["simulate", str(two_tenants), "--no-progress", "--config", str(config)]

    assert main([*base, "--policies", "spillway,static"]) == 0
    table = capsys.readouterr().out
    assert "per tenant, spillway:" in table and "per tenant, static" not in table
    row = next(line.split() for line in table.splitlines() if line.startswith("team-a "))
    assert row[1:3] == ["3", "3"] and row[3] == "3.0" and row[5] == "2"  # jobs, started, node-h, held

    assert main([*base, "--policies", "spillway", "--json"]) == 0
    tenants = json.loads(capsys.readouterr().out)["policies"][0]["tenants"]
    assert tenants["team-a"]["pods_held_by_limit_code"] == {"tenant-limit": 2}
    assert tenants["team-b"]["pods_held_by_limits"] == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tenants:\n  team-a:\n    limits:\n      nvidia.com/gpu: lots\n", "tenants.team-a.limits"),
        ("tenants:\n  team-a:\n    quota: 1\n", "tenants.team-a.quota: unknown config key"),
        ("max_nodes_total: -1\n", "max_nodes_total"),
    ],
)
def test_simulate_bad_tenant_config_exits_2_with_one_line(
    two_tenants: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    assert main(["simulate", str(two_tenants), "--no-progress", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("price", ["nan", "inf"])
def test_a_price_that_is_no_finite_number_exits_2(
    small_trace: Path, capsys: pytest.CaptureFixture[str], price: str
) -> None:
    """``--price p3.16xlarge=nan`` (or ``inf``) was accepted: ``nan < 0`` is false, so every cost of the
    report came out NaN or infinite, while ``--group``'s price (``_usd``) refuses the same text. Rule:
    bad input exits 2 with one line naming the option (spillway.cli; check_arguments: "Refuse unusable
    arguments before the replay starts, each with an error naming the option")."""
    assert main(["simulate", str(small_trace), "--no-progress", "--price", f"p3.16xlarge={price}"]) == 2
    assert f"--price p3.16xlarge={price}: expected TYPE=USD" in capsys.readouterr().err


def test_a_wide_duration_noise_gives_the_longest_deadline_instead_of_overflowing(
    small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A factor exp(|N(0, SIGMA)|) past e^709 is no float: with SIGMA 800 most draws overflowed
    (OverflowError, a traceback). activeDeadlineSeconds is an int64, so such a known bound is the
    longest deadline a pod can carry, 2^63-1 seconds."""
    code = main(["simulate", str(small_trace), "--no-progress", "--json", "--policies", "spillway",
                 "--duration-noise", "800"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["policies"][0]["jobs_started"] == 12


PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ONE_GROUP = ["--group", "gpu:us-east-1:p3.16xlarge:0:2"]  # 16 GPUs at its MaxSize


@pytest.mark.parametrize(
    ("header", "row", "args", "where"),
    [
        # 17 GPUs: three pods (8, 8, 1) that start together, on a group of at most two 8-GPU nodes
        (PHILLY, "2017-10-03 00:01:00,600,17,17,a", ONE_GROUP, "line 3, column num_gpus"),
        (PHILLY, "2017-10-03 00:01:00,600,100000000,1,a", [], "line 3, column num_gpus"),
        (GENERIC, "60,600,100m,0.1,0,100000000,ml,0", [], "line 3, column count"),
        (GENERIC, "60,600,1,1,1,17,ml,0", ONE_GROUP, "line 3, column count"),
    ],
    ids=["philly-17-gpus", "philly-1e8-gpus", "generic-1e8-pods", "generic-17-pods"],
)
def test_a_job_the_groups_could_never_start_is_refused_naming_its_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str, row: str, args: list[str], where: str
) -> None:
    """A job's pods start together: one that needs more than every group at its MaxSize holds never
    starts. It was replayed to the horizon and counted in the lower bound as work the fleet could do;
    one of ~10^8 pods or GPUs hung the command, a pod built for each. Refused before the replay now."""
    first = "2017-10-03 00:00:00,600,8,4800,a" if header == PHILLY else "0,600,1,1,1,1,ml,0"
    path = tmp_path / "big.csv"
    path.write_text(f"{header}{first}\n{row}\n")

    code = main(["simulate", str(path), "--no-progress", "--policies", "spillway", *args])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"spillway simulate: {path}: {where}: a job of ") and len(err.splitlines()) == 1
    assert "more than the groups hold at their MaxSize" in err and "no policy could ever start it" in err


def test_a_job_the_groups_hold_exactly_at_their_max_size_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "full.csv"
    path.write_text(f"{PHILLY}2017-10-03 00:00:00,600,16,9600,a\n")

    assert main(["simulate", str(path), "--no-progress", "--policies", "spillway", "--json", *ONE_GROUP]) == 0
    (spillway,) = json.loads(capsys.readouterr().out)["policies"]
    assert spillway["jobs_never_started"] == 0 and spillway["node_hours_by_group"]["gpu"] > 0


def test_an_outage_time_without_an_offset_is_utc_whatever_the_trace_s_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README: an --outage ISO-8601 time without an offset is read as UTC, as a submit time without
    one is. The first submit here is 08:00+08:00, 00:00 UTC; an outage 01:00-02:00 is 1 to 2 hours in
    (it was read in the first submit's offset: 17:00-18:00 UTC of the day before, -7 h to -6 h)."""
    path = tmp_path / "offset.csv"
    path.write_text(f"{PHILLY}2017-10-03 08:00:00+08:00,600,8,4800,a\n")
    outage = "gpu-us-east-1=2017-10-03T01:00:00/2017-10-03T02:00:00"
    args = ["simulate", str(path), "--no-progress", "--policies", "static", "--json", "--outage", outage]

    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace"]["first_submit"] == "2017-10-03T00:00:00Z"
    assert out["config"]["outages"] == [{"group": "gpu-us-east-1", "start": 3600, "end": 7200}]
