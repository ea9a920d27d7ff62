"""`spillway plan`: the published contract, and one clear line for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from examples import EVENTS, EXAMPLE

from spillway.cli import main
from spillway.local import objects as o


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_example_plan_follows_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(EXAMPLE, capsys)
    assert code == 0
    plan = json.loads(out)
    assert list(plan) == ["scale_up", "uncordon", "drain", "pending", "kept"]
    for entry in plan["scale_up"]:
        assert {"group", "region", "from", "to", "pods", "reason"} <= set(entry)
        assert set(entry) <= {"group", "region", "from", "to", "pods", "reason", "tenants", "gangs"}
        assert sum(entry["tenants"].values()) == entry["to"] - entry["from"]
    assert {s["region"] for s in plan["scale_up"]} == {"us-east-1", "us-west-2"}
    assert all(set(d) == {"node", "instance_id", "group", "reason"} for d in plan["drain"])
    assert all(e["reason"] for key in plan for e in plan[key])


def test_state_out_writes_the_new_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "state.json"
    code, _, _ = run([*EXAMPLE, "--state-out", str(out_file)], capsys)
    assert code == 0
    state = json.loads(out_file.read_text())
    # the example plan scales up (its raises) and its groups with nodes have their templates remembered
    assert set(state) == {"nodes", "groups", "raises", "templates"}
    assert state["templates"] and all(v["node"] and v["allocatable"] for v in state["templates"].values())
    assert all("idle_since" in v for v in state["nodes"].values())
    assert set(state["raises"]) and all(
        set(v) == {"to", "since", "group", "region"} for v in state["raises"].values()
    )
    assert all(key == f"{v['region']}/{v['group']}" for key, v in state["raises"].items())


def write(tmp_path: Path, name: str, content: str | dict[str, object]) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def replace_arg(flag: str, value: str) -> list[str]:
    args = list(EXAMPLE)
    args[args.index(flag) + 1] = value
    return args


@pytest.mark.parametrize(
    ("flag", "name", "content", "expected"),
    [
        ("--cluster", "c.json", "{not json", "c.json: not valid JSON"),
        ("--cluster", "c.json", {"kind": "List"}, "c.json: items: missing or not a list"),
        (
            "--cluster",
            "c.json",
            o.kube_list([o.pod("p", cpu="two")]),
            "c.json: items[0].spec.containers.0.resources.requests.cpu",
        ),
        ("--asgs", "a.json", {"Groups": []}, "a.json: AutoScalingGroups: missing or not a list"),
        (
            "--asgs",
            "a.json",
            {"AutoScalingGroups": [{k: v for k, v in o.asg("g").items() if k != "MaxSize"}]},
            "a.json: AutoScalingGroups[0].MaxSize: Field required",
        ),
        (
            "--asgs",
            "a.json",
            {"AutoScalingGroups": [{**o.asg("g"), "MinSize": -1}]},
            "a.json: AutoScalingGroups[0].MinSize",
        ),
        (
            "--asgs",
            "a.json",
            {"AutoScalingGroups": [{**o.asg("g"), "AutoScalingGroupARN": "arn:aws:ec2:::x"}]},
            "a.json: AutoScalingGroups[0].AutoScalingGroupARN",
        ),
        ("--config", "c.yaml", "clusterr: ml\n", "c.yaml: clusterr: unknown config key"),
        ("--config", "c.yaml", "scale_down_idle_minutes: -5\n", "c.yaml: scale_down_idle_minutes"),
        ("--config", "c.yaml", "node_reserve: {cpu: lots}\n", "c.yaml: node_reserve.cpu"),
        (
            "--config",
            "c.yaml",
            "node_reserve: {vm_memory_overhead_percent: 7.5}\n",
            "c.yaml: node_reserve.vm_memory_overhead_percent",
        ),
        ("--state", "s.json", {"nodes": {"n": {"idle_since": "yesterday"}}}, "s.json: nodes.n.idle_since"),
        # a number was read as seconds since 1970: an instance joining since 1970, a node idle since then
        (
            "--state",
            "s.json",
            {"joining": {"i-1": {"since": 5}}},
            "s.json: joining.i-1.since: Value error, expected an ISO 8601 date and time",
        ),
        ("--state", "s.json", {"nodes": {"n": {"idle_since": 1.7e9}}}, "s.json: nodes.n.idle_since"),
        ("--state", "s.json", {"nodes": {"n": {"idle_since": "1700000000"}}}, "not the number '1700000000'"),
        (
            "--state",
            "s.json",
            {"groups": {"g": {"backoff_until": 0, "reason": "x"}}},
            "groups.g.backoff_until",
        ),
        # a time no delay can be added to: the planner's arithmetic overflowed (a traceback, not a plan)
        (
            "--state",
            "s.json",
            {"scale_down": {"failed": {"since": "9999-12-31T23:59:59Z"}}},
            "s.json: scale_down.failed.since: Value error, 9999-12-31T23:59:59+00:00 is past",
        ),
        ("--activities", "x.json", {"Activities": [{"ActivityId": "a"}]}, "x.json: Activities[0]."),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_file_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    name: str,
    content: str | dict[str, object],
    expected: str,
) -> None:
    code, out, err = run(replace_arg(flag, write(tmp_path, name, content)), capsys)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert expected in err
    assert "Traceback" not in err


def test_missing_file_and_bad_now(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(replace_arg("--cluster", "/nonexistent/c.json"), capsys)
    assert code == 2 and "/nonexistent/c.json: No such file" in err
    code, _, err = run(replace_arg("--now", "tuesday"), capsys)
    assert code == 2 and "--now" in err


@pytest.mark.parametrize(
    "now",
    ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z",
     "9999-12-31T23:59:59-01:00", "9000-01-01T00:00:00Z"],
)  # fmt: skip
def test_a_now_outside_the_years_a_plan_can_reach_is_refused_naming_it(
    now: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--now 0001-01-01T00:00:00Z`` crashed with a traceback (OverflowError in the planner's
    ``now - max_node_provision_minutes``, spillway.planner.joins); near 9999-12-31 a plan that backs a
    group off (``now + launch_failure_backoff_minutes``) crashed the same way. Refused now, one line
    naming ``--now`` and the times it takes, nothing planned."""
    code, out, err = run(replace_arg("--now", now), capsys)
    assert (code, out) == (2, "")
    assert "--now" in err and "1970-01-01T00:00:00Z" in err and "9000-01-01T00:00:00Z" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("now", ["1970-01-01T00:00:00Z", "8999-12-31T23:59:59.999999Z"])
def test_a_now_at_either_end_of_the_years_it_takes_plans(
    now: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(replace_arg("--now", now), capsys)
    assert code == 0, err
    assert list(json.loads(out))[:2] == ["scale_up", "uncordon"]


def test_the_installed_command_runs_as_a_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "spillway.cli", *EXAMPLE],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["scale_up"]


# --- input that hangs, crashes or lies: one line and exit 2, never a traceback or a wrong plan ---


def assert_one_line_error(code: int, out: str, err: str, *expected: str) -> None:
    assert code == 2, (out, err)
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for text in expected:
        assert text in err


def cluster_doc() -> dict[str, object]:
    return json.loads((EVENTS / "example-cluster.json").read_text())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1e999999999", "quantity out of range"),
        ("1e400", "quantity out of range"),
        ("-16", "must not be negative"),
    ],
)
def test_a_hostile_request_in_the_cluster_file_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, expected: str
) -> None:
    doc = cluster_doc()
    items = doc["items"]
    assert isinstance(items, list)
    index = next(i for i, item in enumerate(items) if item["metadata"]["name"] == "train-llm-0")
    items[index]["spec"]["containers"][0]["resources"].setdefault("limits", {})["nvidia.com/gpu"] = value
    code, out, err = run(replace_arg("--cluster", write(tmp_path, "c.json", doc)), capsys)
    assert_one_line_error(
        code, out, err, f"c.json: items[{index}].spec.containers.0.resources.limits.nvidia.com/gpu", expected
    )


@pytest.mark.parametrize("cost", ["1e3", "9" * 5000])  # 5,000 digits: int() refuses them, unnamed before
def test_a_pod_deletion_cost_the_api_server_refuses_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cost: str
) -> None:
    doc = cluster_doc()
    items = doc["items"]
    assert isinstance(items, list)
    index = next(i for i, item in enumerate(items) if item["metadata"]["name"] == "train-llm-0")
    items[index]["metadata"].setdefault("annotations", {})["controller.kubernetes.io/pod-deletion-cost"] = (
        cost
    )
    code, out, err = run(replace_arg("--cluster", write(tmp_path, "c.json", doc)), capsys)
    assert_one_line_error(
        code,
        out,
        err,
        f"c.json: items[{index}].metadata.annotations.controller.kubernetes.io/pod-deletion-cost",
        "32-bit integer",
        "/train-llm-0",
    )


def test_a_hostile_node_reserve_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, "c.yaml", "node_reserve:\n  cpu: 1e999999999\n")
    code, out, err = run(replace_arg("--config", config), capsys)
    assert_one_line_error(code, out, err, "c.yaml: node_reserve.cpu", "out of range")


@pytest.mark.parametrize("minutes", [".inf", "1e300", "1e999999999"])
@pytest.mark.parametrize("key", ["scale_down_idle_minutes", "gang_launch_minutes"])
def test_config_minutes_must_be_finite_and_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], minutes: str, key: str
) -> None:
    config = write(tmp_path, "c.yaml", f"{key}: {minutes}\n")
    code, out, err = run(replace_arg("--config", config), capsys)
    assert_one_line_error(code, out, err, f"c.yaml: {key}")


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_a_bad_gang_launch_window_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    config = write(tmp_path, "c.yaml", f"gang_launch_minutes: {value}\n")
    code, out, err = run(replace_arg("--config", config), capsys)
    assert_one_line_error(code, out, err, "c.yaml: gang_launch_minutes")


def test_gang_settings_come_from_the_environment_and_bad_ones_name_the_variable() -> None:
    from spillway.errors import ConfigurationError
    from spillway.runtime import load_runtime_config

    env = {"CLUSTER_NAME": "ml", "REGIONS": "us-east-1", "SNAPSHOTS_TABLE": "snap", "PLANS_TABLE": "plans",
           "STATE_TABLE": "state", "GANG_LAUNCH_STATE_MACHINE_ARN": "arn:gang", "GANG_DEADLINE_SECONDS": "300",
           "GANG_POLL_SECONDS": "5", "GANG_LAUNCH_MINUTES": "8"}  # fmt: skip
    config = load_runtime_config(env)
    assert (config.gang_launch_state_machine_arn, config.gang_deadline_seconds) == ("arn:gang", 300)
    assert config.gang_poll_seconds == 5 and config.planner.gang_launch_minutes == 8
    for var, bad in (("GANG_DEADLINE_SECONDS", "0"), ("GANG_LAUNCH_MINUTES", "-2")):
        with pytest.raises(ConfigurationError, match=f"^{var}: "):
            load_runtime_config({**env, var: bad})


def test_the_same_asg_file_twice_is_refused_naming_both(capsys: pytest.CaptureFixture[str]) -> None:
    east = str(EVENTS / "example-asgs-us-east-1.json")
    code, out, err = run([*EXAMPLE, "--asgs", east], capsys)
    assert_one_line_error(
        code,
        out,
        err,
        f"{east}: AutoScalingGroups[0].AutoScalingGroupARN",
        f"also {east} AutoScalingGroups[0]",
    )


def test_one_instance_in_two_groups_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads((EVENTS / "example-asgs-us-east-1.json").read_text())
    groups = doc["AutoScalingGroups"]
    groups[1]["Instances"].append(dict(groups[0]["Instances"][0]))
    code, out, err = run(replace_arg("--asgs", write(tmp_path, "a.json", doc)), capsys)
    assert_one_line_error(
        code,
        out,
        err,
        "a.json: AutoScalingGroups[1].Instances[1].InstanceId",
        "AutoScalingGroups[0].Instances[0]",
    )


def test_two_nodes_with_one_name_are_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = cluster_doc()
    items = doc["items"]
    assert isinstance(items, list)
    items.append(json.loads(json.dumps(items[0])))
    name = items[0]["metadata"]["name"]
    code, out, err = run(replace_arg("--cluster", write(tmp_path, "c.json", doc)), capsys)
    assert_one_line_error(code, out, err, f"c.json: items[{len(items) - 1}]: Node {name} is also items[0]")


@pytest.mark.parametrize("flag", ["--cluster", "--asgs", "--activities", "--state", "--config"])
@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe\x00garbage",
        b'{"items": [], "kind": "List", "x": "\xe9t\xe9"}',
        b'{"AutoScalingGroups": [], "Activities": [], "items": [], "n": ' + b"9" * 5000 + b"}",
        b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=["random-bytes", "latin-1", "huge-integer", "deep-nesting"],
)
def test_unreadable_input_is_one_line_in_every_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, content: bytes
) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    code, out, err = run(replace_arg(flag, str(path)), capsys)
    assert_one_line_error(code, out, err, f"{path}: ")


def test_a_newline_in_a_json_key_stays_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"nodes": {"evil\nnode": {"idle_since": "not a time"}}}
    code, out, err = run(replace_arg("--state", write(tmp_path, "s.json", doc)), capsys)
    assert_one_line_error(code, out, err, "s.json: nodes.evil\\nnode.idle_since")


def test_an_unwritable_state_out_is_one_line_and_no_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "state.json"
    code, out, err = run([*EXAMPLE, "--state-out", str(target)], capsys)
    assert_one_line_error(code, out, err, f"--state-out {target}", "No such file")


def test_version_and_plain_help(capsys: pytest.CaptureFixture[str]) -> None:
    from spillway import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"spillway {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    assert "``" not in help_text
    assert "Spillway" in help_text


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "tenants: {team-a: {limits: {cpu: lots}}}\n",
            "c.yaml: tenants.team-a.limits: Value error, cpu: not a quantity",
        ),
        ("tenants: {team-a: {limit: {cpu: 4}}}\n", "c.yaml: tenants.team-a.limit: unknown config key"),
        # a misspelt resource was a limit that never binds (found by review)
        (
            "tenants: {team-a: {limits: {cpus: 4}}}\n",
            "tenants.team-a.limits: Value error, cpus: not a resource name",
        ),
        (
            "tenants: {team-a: {limits: {gpu: 4}}}\n",
            "tenants.team-a.limits: Value error, gpu: not a resource name",
        ),
        (
            "tenants: {team-a: {scopes: [{node_groups: [g], limits: {nodes: -1}}]}}\n",
            "tenants.team-a.scopes.0.limits",
        ),
        ("max_nodes_total: -1\n", "c.yaml: max_nodes_total"),
        # a drain deadline of 0 whole seconds, as the functions refuse DRAIN_DEADLINE_SECONDS=0.4: the plan
        # judged by a deadline no drain can be given
        (
            "drain_deadline_seconds: 0.4\n",
            "c.yaml: drain_deadline_seconds: Value error, 0.4 is 0 whole seconds",
        ),
        ("cores_total: '10'\n", "c.yaml: cores_total: Value error, expected <min>:<max> integers"),
        ("cores_total: '20:10'\n", "c.yaml: cores_total: Value error, expected 0 <= min <= max"),
        ("memory_total: 'a:b'\n", "c.yaml: memory_total: Value error, expected <min>:<max> integers"),
        ("gpu_total: ['nvidia.com/gpu:4']\n", "c.yaml: gpu_total"),
        # the path names the toleration: it read buffers.0.pod.tolerations.operator, which of the two?
        (
            "buffers: [{name: b, replicas: 1, pod: {tolerations: [{key: a}, {key: x, operator: Bogus}]}}]\n",
            "c.yaml: buffers.0.pod.tolerations.1.operator: Input should be",
        ),
        (
            "buffers: [{name: b, replicas: 1, pod: {tolerations: [{key: a}, 5]}}]\n",
            "c.yaml: buffers.0.pod.tolerations.1: ",
        ),
        # a node_selector no node can match (not a label) left the buffer short with no-group-fits
        (
            "buffers: [{name: b, replicas: 1, pod: {cpu: 1, node_selector: {'pool type': gpu}}}]\n",
            "c.yaml: buffers.0.pod.node_selector: Value error, key 'pool type' has a name part",
        ),
        (
            "buffers: [{name: b, replicas: 1, pod: {cpu: 1, node_selector: {'Example.com/pool': gpu}}}]\n",
            "c.yaml: buffers.0.pod.node_selector: Value error, key 'Example.com/pool' has a prefix",
        ),
        (
            "buffers: [{name: b, replicas: 1, pod: {cpu: 1, node_selector: {pool: -gpu-}}}]\n",
            "c.yaml: buffers.0.pod.node_selector: Value error, value '-gpu-' of 'pool' is not a label value",
        ),
        # a tenant scope's node_selector no node can match (not a label) was a limit that never bound
        (
            "tenants: {team-a: {scopes: [{node_selector: {'pool type': gpu}, limits: {nodes: 2}}]}}\n",
            "c.yaml: tenants.team-a.scopes.0.node_selector: Value error, key 'pool type' has a name part",
        ),
        (
            "tenants: {team-a: {scopes: [{node_groups: [g]}, {node_selector: {pool: -gpu-}}]}}\n",
            "c.yaml: tenants.team-a.scopes.1.node_selector: Value error, value '-gpu-' of 'pool' is not",
        ),
        # a key given twice was read as its last value, the first silently lost (YAML wants keys unique;
        # go-yaml v3, which Kubernetes tools read YAML with, refuses it)
        (
            "tenants:\n  team-a: {limits: {cpu: 4}}\n  team-b: {}\n  team-a: {limits: {cpu: 400}}\n",
            "c.yaml: not valid YAML or JSON: key 'team-a' is given twice (lines 2 and 4)",
        ),
        (
            "scale_down_idle_minutes: 5\nscale_down_idle_minutes: 50\n",
            "'scale_down_idle_minutes' is given twice",
        ),
        ('{"max_nodes_total": 10, "max_nodes_total": 1000}\n', "key 'max_nodes_total' is given twice"),
    ],
)
def test_bad_shared_cluster_config_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, expected: str
) -> None:
    code, out, err = run(replace_arg("--config", write(tmp_path, "c.yaml", config)), capsys)
    assert_one_line_error(code, out, err, expected)


def test_a_merge_source_overriding_a_merged_key_is_no_repeat(tmp_path: Path) -> None:
    """YAML merge (<<) lets a mapping override a key it merges. PyYAML flattens a merge source in place
    (the merged pairs spliced before its own) when it first merges it; a source defined inline at a
    << and named again by its alias was then checked as flattened, so its own limits after the merged
    ones read as a key given twice and a valid --config was refused. A key truly given twice, null
    or a date included (a dict folds them too), is still refused."""
    from spillway.config import load_config_file
    from spillway.errors import ConfigurationError

    merged = (
        "tenants:\n  team-a:\n    <<: &base\n      <<: {limits: {cpu: 4}}\n      limits: {cpu: 8}\n"
        "  team-b: *base\n"
    )
    tenants = load_config_file(write(tmp_path, "c.yaml", merged)).tenants
    assert tenants["team-b"].limits == {"cpu": "8"}
    for twice, key in [("~: 1\nnull: 2\n", "None"), ("2024-01-01: 1\n2024-01-01: 2\n", "datetime.date")]:
        with pytest.raises(ConfigurationError, match=f"key {key}.* is given twice"):
            load_config_file(write(tmp_path, "c.yaml", twice))


def test_plan_reads_namespaces_pod_groups_and_capacity_quotas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl get nodes,pods,pdb,namespaces,podgroups...,capacityquotas -A -o json, end to end."""
    items = json.loads((EVENTS / "example-cluster.json").read_text())["items"]
    items += [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "research", "labels": {"spillway.io/tenant": "lab"}},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "hpo", "namespace": "research"},
            "spec": {"minMember": 2, "minResources": {"cpu": "14", "memory": "40Gi"}},
            "status": {"phase": "Pending"},
        },
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "hpo", "namespace": "research"},
            "spec": {"minMember": 1},
        },
        {
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityQuota",
            "metadata": {"name": "all"},
            "spec": {"limits": {"resources": {"nodes": "1000"}}},
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ignored", "namespace": "default"}},
    ]
    cluster = write(tmp_path, "c.json", {"apiVersion": "v1", "kind": "List", "items": items})
    code, out, _ = run(replace_arg("--cluster", cluster), capsys)
    assert code == 0
    plan = json.loads(out)
    gangs = [g for s in plan["scale_up"] for g in s.get("gangs", [])]
    assert [g["gang"] for g in gangs] == ["research/hpo"]
    # The Pending PodGroup's two virtual pods: on the gang's new node or free room, all placed.
    fits = {p["pod"] for p in plan["pending"] if p["code"].startswith("fits-")}
    assert set(gangs[0]["pods"]) | (fits & {"research/hpo[0]", "research/hpo[1]"}) == {
        "research/hpo[0]",
        "research/hpo[1]",
    }

    # A CapacityQuota allowing no more nodes stops every scale-up, with its code.
    items[-2]["spec"]["limits"]["resources"]["nodes"] = "0"
    cluster = write(tmp_path, "c.json", {"apiVersion": "v1", "kind": "List", "items": items})
    code, out, _ = run(replace_arg("--cluster", cluster), capsys)
    plan = json.loads(out)
    assert code == 0 and plan["scale_up"] == []
    assert "capacity-quota" in {p["code"] for p in plan["pending"]}


def test_a_bad_quantity_in_a_capacity_quota_is_refused_naming_the_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityQuota",
        "metadata": {"name": "q"},
        "spec": {"limits": {"resources": {"cpu": "many"}}},
    }
    cluster = write(tmp_path, "c.json", o.kube_list([quota]))
    code, out, err = run(replace_arg("--cluster", cluster), capsys)
    assert_one_line_error(code, out, err, "c.json: items[0].spec.limits.resources.cpu")


def test_plan_reads_provisioning_requests_and_their_pod_templates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl get nodes,pods,pdb,provisioningrequests,podtemplates -A -o json: the plan prints the
    statuses it would write."""
    items = json.loads((EVENTS / "example-cluster.json").read_text())["items"]
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}]}
    items += [
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "ppt-small", "namespace": "default"},
         "template": {"spec": spec}},
        {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
         "metadata": {"name": "small", "namespace": "default", "generation": 1,
                      "creationTimestamp": "2026-11-02T09:55:00Z"},
         "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                  "podSets": [{"podTemplateRef": {"name": "ppt-small"}, "count": 1}]}},
        {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
         "metadata": {"name": "orphan", "namespace": "default", "creationTimestamp": "2026-11-02T09:55:00Z"},
         "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                  "podSets": [{"podTemplateRef": {"name": "gone"}, "count": 1}]}},
    ]  # fmt: skip
    cluster = write(tmp_path, "c.json", {"apiVersion": "v1", "kind": "List", "items": items})

    code, out, _ = run(replace_arg("--cluster", cluster), capsys)

    assert code == 0
    statuses = {p["request"]: p for p in json.loads(out)["provisioning"]}
    assert set(statuses) == {"default/small", "default/orphan"}

    def reasons(name: str) -> dict[str, tuple[str, str]]:
        return {c["type"]: (c["status"], c["reason"]) for c in statuses[f"default/{name}"]["conditions"]}

    assert reasons("small") == {"Accepted": ("True", "Accepted"), "Provisioned": ("True", "CapacityIsFound")}
    assert reasons("orphan") == {"Failed": ("True", "FailedToCreatePods")}
    assert "PodTemplate default/gone not found" in statuses["default/orphan"]["conditions"][0]["message"]


@pytest.mark.parametrize(
    ("flags", "teams", "night"),
    [([], True, True), (["--no-night"], True, False), (["--no-teams", "--no-night"], False, False)],
)
def test_demo_scenes_two_and_three_can_be_skipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: list[str], teams: bool, night: bool
) -> None:
    import spillway.local.demo as demo

    seen: list[demo.DemoOptions] = []

    def fake(options: demo.DemoOptions, out: object = None) -> demo.DemoResult:
        seen.append(options)
        return demo.DemoResult(complete=True)

    monkeypatch.setattr(demo, "run_demo", fake)
    assert main(["demo", "--quick", "--chart", str(tmp_path / "d.png"), *flags]) == 0
    [options] = seen
    assert (options.quick, options.teams, options.night) == (True, teams, night)


@pytest.mark.parametrize("value", ["5", "2.5", "true", "0", "false"])
def test_a_gpu_total_that_is_no_list_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """``gpu_total: 5`` (a number, not ``["<type>:<min>:<max>"]``) crashed ``spillway plan`` with a
    TypeError traceback ('int' object is not iterable), and ``gpu_total: 0`` / ``false`` were taken as
    no GPU total at all. Rule: bad input exits 2 with one line naming the file and the field, and
    nothing is lost (../shared/DESIGN.md, "spillway plan"; README, ``gpu_total``: a list of
    ``"<type>:<min>:<max>"``)."""
    config = write(tmp_path, "c.yaml", f"gpu_total: {value}\n")
    code, out, err = run(replace_arg("--config", config), capsys)
    assert_one_line_error(code, out, err, "c.yaml: gpu_total")


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("scale_down_idle_minutes: on", "scale_down_idle_minutes"),
        ("max_scale_in_fraction: no", "max_scale_in_fraction"),
        ("max_nodes_total: true", "max_nodes_total"),
        ("expendable_priority_cutoff: false", "expendable_priority_cutoff"),
        ("buffers: [{name: b, pod: {cpu: '1'}, replicas: yes}]", "buffers.0.replicas"),
        ("node_reserve: {vm_memory_overhead_percent: off}", "node_reserve.vm_memory_overhead_percent"),
    ],
)
def test_a_boolean_where_a_number_is_asked_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, field: str
) -> None:
    """Pydantic's lax mode took ``True`` for 1 and ``False`` for 0, and YAML 1.1 reads an unquoted ``on``,
    ``yes`` or ``no`` as a boolean: ``scale_down_idle_minutes: on`` planned with a one-minute idle time,
    ``max_scale_in_fraction: no`` removed nothing, without a word. Rule: bad input gets a clear error
    naming the field (DESIGN.md)."""
    config = write(tmp_path, "c.yaml", setting + "\n")
    code, out, err = run(replace_arg("--config", config), capsys)
    assert_one_line_error(code, out, err, f"c.yaml: {field}", "not the boolean")


def test_an_unquoted_consolidation_off_says_to_quote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``consolidation: off``, as the README's configuration table writes the value, is read by YAML 1.1
    (PyYAML) as the boolean false; the refusal said "Input should be 'off', 'when-empty' or
    'when-underutilized'", telling the user to write what they wrote. Rule: bad input gets a clear error
    naming the field (DESIGN.md; README "consolidation"); the time windows and priorities already say
    what YAML read and to quote it."""
    config = write(tmp_path, "c.yaml", "consolidation: off\n")
    code, out, err = run(replace_arg("--config", config), capsys)
    assert_one_line_error(code, out, err, "c.yaml: consolidation", "YAML reads an unquoted off")


def test_a_groups_problems_are_named_on_stderr_and_the_plan_still_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tag Spillway cannot read is left out and named in the group's problems (README: the group tags
    table, autoscaling-options): observe stores them in the snapshot, but spillway plan printed them
    nowhere, so an autoscaling-options value out of range, or a consolidation mode misspelt, was read
    as no tag at all without a word. Each is now one warning line on stderr, naming the group, its
    region and the tag; the plan is printed and the exit code is 0 as before."""
    asgs = json.loads((EVENTS / "example-asgs-us-east-1.json").read_text())
    option = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownutilizationthreshold"
    asgs["AutoScalingGroups"][1]["Tags"].append({"Key": option, "Value": "1.5"})
    name = asgs["AutoScalingGroups"][1]["AutoScalingGroupName"]
    path = write(tmp_path, "asgs.json", asgs)
    code, out, err = run(replace_arg("--asgs", path), capsys)
    assert code == 0 and json.loads(out)["scale_up"]
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"spillway plan: warning: group us-east-1/{name}: Tags[{option}]"), lines[0]
    assert "1.5" in lines[0]
    # a consolidation or atomic-launch mode misspelt, read as off, is named too
    asgs["AutoScalingGroups"][1]["Tags"][-1] = {"Key": "spillway.io/consolidation", "Value": "when-idle"}
    asgs["AutoScalingGroups"][1]["Tags"].append({"Key": "spillway.io/atomic-launch", "Value": "flet"})
    code, out, err = run(replace_arg("--asgs", write(tmp_path, "asgs.json", asgs)), capsys)
    assert code == 0 and len(err.splitlines()) == 2, err
    assert (
        "Tags[spillway.io/atomic-launch]: 'flet'" in err
        and "Tags[spillway.io/consolidation]: 'when-idle'" in err
    )
    # a clean input warns of nothing
    assert run(EXAMPLE, capsys)[2] == ""
