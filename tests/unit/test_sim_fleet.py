"""Which node types a replay may launch, for the bound, the ideal packers and the references.

Hand-computed on tiny generic traces. Allocatable room (spillway.model.reserve, EKS): p3.16xlarge 8 GPUs,
63.77 CPU, 448.5 GiB ($24.48/h); m5.xlarge 3.92 CPU, 13.8 GiB ($0.192/h); m5.24xlarge 95.69 CPU. A GPU
row gets 7.9 CPU and 56 GiB a GPU (the p3's share).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_world import gpu_world

from spillway.sim.bounds import lower_bounds
from spillway.sim.report import format_table
from spillway.sim.run import SimConfig, fleet, simulate
from spillway.sim.trace import Job, read_trace
from spillway.sim.world import GroupSpec, SimJob

HEADER = "submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority\n"
GPU = GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, 10)
CPU = GroupSpec("cpu", "us-east-1", "m5.xlarge", 0, 10)


def trace(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def test_a_group_of_maxsize_0_holds_no_job_and_is_no_type_of_the_bound(tmp_path: Path) -> None:
    # A 90-CPU pod fits only an m5.24xlarge, whose group may launch none (MaxSize 0): no node could
    # ever hold it, so it is a job no group can run, left out of the bound and the packers, and no
    # replay waits for it. The 1-GPU job alone: one p3 for 600 s, 1/6 node-hour, $4.08.
    rows = ["0,600,,,1,1,ml,0", "0,600,90,10,0,1,web,0"]
    big = GroupSpec("big", "us-east-1", "m5.24xlarge", 0, 0)
    config = SimConfig(
        groups=(GPU, big),
        policies=("static", "ec2-autoscaler"),
        prices={"p3.16xlarge": 24.48, "m5.24xlarge": 4.608},
    )
    assert [t.name for t in fleet(config)] == ["p3.16xlarge"]
    report = simulate(config, read_trace(trace(tmp_path, rows)))
    assert report.unrunnable == 1
    assert report.bounds.step_node_hours == pytest.approx(600 / 3600)
    assert report.bounds.step_cost_usd == pytest.approx(24.48 / 6)
    assert report.bounds.resource == "nvidia.com/gpu" and report.bounds.peak_nodes == 1
    for packer in report.packers:
        assert (packer.node_hours, packer.nodes_opened) == (pytest.approx(600 / 3600), 1)
    for result in report.results:  # nothing waits for the job no node can hold
        assert result.jobs_unstarted == 0 and result.hours < 1


def test_static_provisions_the_peak_on_the_node_type_the_bound_counts_in(tmp_path: Path) -> None:
    # A GPU trace on a mixed fleet, its CPU group listed first (a region preference). The bound's peak
    # is 2 nodes of the type with the most GPUs (8 + 4 GPUs at once); static provisioning for it puts
    # them in the GPU group, where every job starts at its submit, not in the CPU group, where none
    # could ever run.
    rows = ["0,3600,,,8,1,ml,0", "0,3600,,,4,1,ml,0"]
    config = SimConfig(groups=(CPU, GPU), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, rows)))
    assert report.bounds.peak_nodes == 2
    world = report.runs[0].world
    assert (world.groups["cpu"].desired, world.groups["gpu"].desired) == (0, 2)
    result = report.results[0]
    assert result.jobs_started == 2 and result.jobs_unstarted == 0
    assert result.pending_weighted_seconds["p99"] == 0
    assert result.node_hours == pytest.approx(2.0) and result.cost_usd == pytest.approx(2 * 24.48)


def test_static_keeps_the_group_order_when_the_types_alike_hold_the_binding_resource(tmp_path: Path) -> None:
    # One node type in two regions: the primary group first, as before (and as the README's figures).
    west = GroupSpec("gpu-west", "us-west-2", "p3.16xlarge", 0, 10)
    config = SimConfig(groups=(west, GPU), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,,,8,1,ml,0", "0,3600,,,4,1,ml,0"])))
    world = report.runs[0].world
    assert (world.groups["gpu-west"].desired, world.groups["gpu"].desired) == (2, 0)


def test_a_group_of_maxsize_0_sizes_no_row(tmp_path: Path) -> None:
    # A g5.12xlarge group (4 GPUs, 47.81 CPU: 11.9 CPU a GPU) listed first at MaxSize 0 launches
    # nothing, so a GPU row takes the share of the p3 it runs on (7.9 CPU and 56 GiB a GPU), not the
    # g5's (with which eight 1-GPU pods, 95.2 CPU, would not fit one p3 and need two).
    g5 = GroupSpec("g5", "us-east-1", "g5.12xlarge", 0, 0)
    config = SimConfig(groups=(g5, GPU), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,,,1,8,ml,0"])))
    pod = report.runs[0].world.jobs[0].job.pods[0]
    assert (pod["cpu"], pod["memory"]) == (7900, 56 * 2**30 * 1000)
    assert report.bounds.peak_nodes == 1 and report.results[0].node_hours == pytest.approx(1.0)


def test_a_restarted_job_s_deadline_is_at_most_an_int64() -> None:
    # The widest noise caps a job's known duration at 2^63-1 s, the most activeDeadlineSeconds holds.
    # Moved after 5 s of a 100 s run with a 600 s penalty, it has 695 s left, more than its duration:
    # its new pods' deadline, grown by the same factor, must still be an int64 (it was 6.95 x 2^63).
    longest = 2**63 - 1
    world = gpu_world(2, restart_penalty=600, track_infos=True)
    request = {"cpu": 7900, "memory": 56 * 2**30 * 1000, "nvidia.com/gpu": 1000, "pods": 1000}
    job = SimJob(Job(1, "job-1", "ml", 0, 100, 0, (request,), movable=True, expected=longest))
    world.jobs.append(job)
    world.arrive(job)
    world.schedule()
    assert world.pod_infos["ml/job-1-0"].active_deadline == longest  # 100 s x the factor, capped
    world.t = 5
    world.drain(job.nodes[0].name)
    world.schedule()
    assert job.state == "running" and job.remaining == 695
    assert world.pod_infos["ml/job-1-0"].active_deadline == longest


def test_static_counts_toward_the_peak_only_nodes_of_the_type_it_is_counted_in(tmp_path: Path) -> None:
    # The CPU group's MinSize node is no GPU node: the peak of 2 GPU nodes is still provisioned whole.
    rows = ["0,3600,,,8,1,ml,0", "0,3600,,,4,1,ml,0"]
    cpu = GroupSpec("cpu", "us-east-1", "m5.xlarge", 1, 10)
    report = simulate(
        SimConfig(groups=(cpu, GPU), policies=("static",), packers=False), read_trace(trace(tmp_path, rows))
    )
    world = report.runs[0].world
    assert (world.groups["cpu"].desired, world.groups["gpu"].desired) == (1, 2)
    assert report.results[0].jobs_started == 2 and report.results[0].pending_weighted_seconds["p99"] == 0


def test_static_counts_the_minsize_nodes_of_the_type_it_provisions_beside_a_larger_maxsize_0_type(
    tmp_path: Path,
) -> None:
    # A p3.16xlarge group at MaxSize 0 launches nothing, so the bound counts the peak in p3.8xlarge nodes
    # (4 GPUs): one 4-GPU job is a peak of 1, which the p3.8xlarge group's MinSize node already is.
    # Static must add none (it added one: the larger MaxSize-0 type was taken for the peak's type, so the
    # MinSize node was not counted, and 2 nodes were billed for 1 node's peak).
    big = GroupSpec("big", "us-east-1", "p3.16xlarge", 0, 0)
    small = GroupSpec("small", "us-east-1", "p3.8xlarge", 1, 10)
    config = SimConfig(groups=(big, small), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,,,4,1,ml,0"])))
    assert report.bounds.peak_nodes == 1
    world = report.runs[0].world
    assert (world.groups["big"].desired, world.groups["small"].desired) == (0, 1)
    assert report.results[0].node_hours == pytest.approx(1.0)
    assert report.results[0].jobs_started == 1 and report.results[0].pending_weighted_seconds["p99"] == 0


def test_static_provisions_the_rest_of_the_peak_s_gpus_on_a_smaller_gpu_type(tmp_path: Path) -> None:
    # Four 4-GPU jobs at once: a peak of 2 p3.16xlarge nodes (16 GPUs). That group may launch only 1, so
    # the other 8 GPUs go to the p3.8xlarge group: 2 nodes of 4 GPUs, not 1 (one job waited for a
    # whole job's end). The CPU group listed first holds no GPU and gets nothing. The p3.8xlarge listed
    # first sizes the rows (7.9 CPU and 55 GiB a GPU, of its 31.85 CPU and 222.8 GiB): a 4-GPU pod fits
    # it, and two fit a p3.16xlarge.
    p316 = GroupSpec("p316", "us-east-1", "p3.16xlarge", 0, 1)
    p38 = GroupSpec("p38", "us-east-1", "p3.8xlarge", 0, 10)
    config = SimConfig(groups=(CPU, p38, p316), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,,,4,1,ml,0"] * 4)))
    assert report.bounds.peak_nodes == 2
    world = report.runs[0].world
    assert [world.groups[g].desired for g in ("cpu", "p316", "p38")] == [0, 1, 2]
    result = report.results[0]
    assert result.jobs_started == 4 and result.jobs_unstarted == 0
    assert result.pending_weighted_seconds["p99"] == 0


def test_static_launches_no_node_without_the_binding_resource(tmp_path: Path) -> None:
    # A peak of 2 p3.16xlarge nodes where the GPU group may launch 1: the rest of the peak's GPUs fit
    # no node the fleet has left, and an m5.xlarge (no GPU) would be billed for nothing (it was).
    one = GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, 1)
    config = SimConfig(groups=(CPU, one), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,,,8,1,ml,0", "0,3600,,,8,1,ml,0"])))
    assert report.bounds.peak_nodes == 2
    world = report.runs[0].world
    assert (world.groups["cpu"].desired, world.groups["gpu"].desired) == (0, 1)


def test_static_launches_no_node_that_holds_no_pod_of_the_trace(tmp_path: Path) -> None:
    # Three 50-GiB pods binding on memory: a peak of 2 r5.4xlarge nodes (about 124 GiB each), where
    # that group may launch 1. The rest of the peak's memory would fit m5.xlarge nodes (13.8 GiB), but
    # none of them holds a 50-GiB pod: static buys none (it bought one, billed for nothing).
    r5 = GroupSpec("r5", "us-east-1", "r5.4xlarge", 0, 1)
    config = SimConfig(groups=(CPU, r5), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,1,50,0,1,web,0"] * 3)))
    assert report.bounds.resource == "memory" and report.bounds.peak_nodes == 2
    world = report.runs[0].world
    assert (world.groups["cpu"].desired, world.groups["r5"].desired) == (0, 1)


@pytest.mark.parametrize("cpu_seconds", [3600, 36000])
def test_static_holds_the_peak_of_every_resource_each_at_its_own_time(
    tmp_path: Path, cpu_seconds: int
) -> None:
    # An 8-GPU job (63.2 CPU) at 0 for an hour; at 2 h a gang of three 40-CPU pods. The GPUs peak at 8
    # at 0, the CPU at 120 at 2 h: the bound's peak is 2 nodes (120 CPU over the m5.24xlarge's 95.69).
    # Static held the peak of one resource only, the one that bound most often: with the gang an hour
    # long (GPUs bind as long, first) 2 p3 nodes, 16 GPUs but 127.5 CPU in two 63.77-CPU halves that
    # hold two of the gang's pods, so it never started; with the gang ten hours long (CPU binds) 2
    # m5.24xlarge nodes and no GPU, so the GPU job never started. The fleet must hold each resource's
    # peak: 8 GPUs (one p3, its 63.77 CPU too), then the CPU's 120 less that (one m5.24xlarge).
    rows = ["0,3600,,,8,1,ml,0", f"7200,{cpu_seconds},40,10,0,3,web,0"]
    big = GroupSpec("cpu", "us-east-1", "m5.24xlarge", 0, 10)
    report = simulate(
        SimConfig(groups=(GPU, big), policies=("static",), packers=False), read_trace(trace(tmp_path, rows))
    )
    assert report.bounds.peak_nodes == 2
    result = report.results[0]
    assert (result.jobs_started, result.jobs_unstarted) == (2, 0)
    assert result.pending_weighted_seconds["p99"] == 0
    world = report.runs[0].world
    assert (world.groups["gpu"].desired, world.groups["cpu"].desired) == (1, 1)


def test_the_cost_bound_is_over_the_resources_every_type_offering_them_has_a_price_for_and_says_so(
    tmp_path: Path,
) -> None:
    # The bundled prices have none for the m5.24xlarge. An 8-GPU job and a 40-CPU job, an hour each, at
    # once. The GPUs' demand can only be held by p3 nodes, priced: at least one p3 for the hour, $24.48,
    # whatever the unpriced type costs, so that bound stands. The CPU and memory could go to the
    # unpriced type, which might be cheaper: no bound of them. The cost bound was None for want of any
    # price, and nothing said why; it is now the GPUs' $24.48, and the report names what it leaves out
    # and why, and which group of a run had no price.
    rows = ["0,3600,,,8,1,ml,0", "0,3600,40,10,0,1,web,0"]
    big = GroupSpec("cpu", "us-east-1", "m5.24xlarge", 0, 10)
    config = SimConfig(groups=(GPU, big), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, rows)))
    bounds = report.bounds
    assert bounds.step_cost_usd == pytest.approx(24.48)
    assert bounds.unpriced == ("m5.24xlarge",)
    assert bounds.cost_resources == ("nvidia.com/gpu",)
    assert bounds.to_dict()["cost_bound_over"] == ["nvidia.com/gpu"]
    assert bounds.to_dict()["unpriced_types"] == ["m5.24xlarge"]
    result = report.results[0]  # static: one p3 and one m5.24xlarge
    assert result.cost_usd is None and result.unpriced_groups == {"cpu": "m5.24xlarge"}
    assert result.to_dict()["cost_unpriced_groups"] == {"cpu": "m5.24xlarge"}
    table = format_table(report.results, bounds)
    assert (
        "cost bound over nvidia.com/gpu only: no price for group cpu (m5.24xlarge) (--price TYPE=USD)"
        in table
    )
    assert "static: cost unknown: no price for group cpu (m5.24xlarge) (--price TYPE=USD)" in table


def test_with_no_priced_type_for_any_resource_the_cost_bound_is_missing_and_the_report_says_why(
    tmp_path: Path,
) -> None:
    big = GroupSpec("cpu", "us-east-1", "m5.24xlarge", 0, 10)
    config = SimConfig(groups=(big,), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,40,10,0,1,web,0"])))
    assert report.bounds.step_cost_usd is None and report.bounds.cost_resources == ()
    assert "no cost bound: no price for group cpu (m5.24xlarge) (--price TYPE=USD)" in format_table(
        report.results, report.bounds
    )


def test_the_cost_note_names_the_unpriced_group_when_another_group_of_its_type_has_a_price(
    tmp_path: Path,
) -> None:
    # Two groups of m5.24xlarge, one with price=, one without: the note said "no price for
    # m5.24xlarge" though one of them has a price. It names the group without one, and its type.
    priced = GroupSpec("cpu-a", "us-east-1", "m5.24xlarge", 0, 10, price=4.608)
    unpriced = GroupSpec("cpu-b", "us-east-1", "m5.24xlarge", 0, 10)
    config = SimConfig(groups=(priced, unpriced), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,40,10,0,1,web,0"])))
    bounds = report.bounds
    assert bounds.step_cost_usd is None and bounds.unpriced == ("m5.24xlarge",)
    assert bounds.unpriced_groups == {"cpu-b": "m5.24xlarge"}
    assert bounds.to_dict()["unpriced_groups"] == {"cpu-b": "m5.24xlarge"}
    assert bounds.cost_note() == "no cost bound: no price for group cpu-b (m5.24xlarge) (--price TYPE=USD)"


def test_a_bound_of_a_room_alone_names_no_type_it_does_not_know() -> None:
    # lower_bounds(jobs, room): a one-type fleet without a name or a price. Its note named the type "".
    job = Job(0, "j", "web", 0, 3600, 0, ({"cpu": 40_000, "memory": 10 * 2**30 * 1000, "pods": 1000},))
    bounds = lower_bounds([job], {"cpu": 95_690, "memory": 357 * 2**30 * 1000, "pods": 737_000})
    assert bounds.step_cost_usd is None and bounds.unpriced == () and bounds.unpriced_groups == {}
    assert bounds.cost_note() == "no cost bound: the node type has no price"


def test_static_holds_every_job_on_its_fleet_empty_not_only_the_peaks_room(tmp_path: Path) -> None:
    # One node type: a gang of three 40-CPU pods on p3.16xlarge nodes (63.77 CPU each). The CPU's peak,
    # 120, is two nodes' room (127.5), but no node holds two of the pods: static bought two nodes, the
    # gang never started, and counted as waiting until the horizon with both nodes billed to it. A
    # fleet provisioned for the peak holds every job of the trace: three nodes, the gang starts at 0.
    config = SimConfig(groups=(GPU,), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,40,10,0,3,web,0"])))
    assert report.bounds.peak_nodes == 2
    result = report.results[0]
    assert (result.jobs_started, result.jobs_unstarted) == (1, 0)
    assert result.max_pending_seconds == 0
    assert report.runs[0].world.groups["gpu"].desired == 3


def test_static_adds_the_node_a_cpu_gang_lacks_in_a_cpu_group_not_a_gpu_one(tmp_path: Path) -> None:
    # A gang of three 60-CPU pods, the GPU group listed first. The CPU's peak (180) is two m5.24xlarge
    # (95.69 CPU each, one pod a node); the third pod fits a p3 (63.77 CPU) as well as another
    # m5.24xlarge, and goes to the group without GPUs: a CPU node for a CPU pod.
    big = GroupSpec("cpu", "us-east-1", "m5.24xlarge", 0, 10)
    config = SimConfig(groups=(GPU, big), policies=("static",), packers=False)
    report = simulate(config, read_trace(trace(tmp_path, ["0,3600,60,10,0,3,web,0"])))
    assert report.results[0].jobs_unstarted == 0
    world = report.runs[0].world
    assert (world.groups["gpu"].desired, world.groups["cpu"].desired) == (0, 3)
