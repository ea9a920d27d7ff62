"""``PLANNER_CONFIG``: the planner configuration beyond the thresholds (tenants, cluster totals) reaches
the functions as one JSON object; the threshold variables override it; bad values name the variable and
the key."""

from __future__ import annotations

import json

import pytest

from spillway.act.drain import parse_request
from spillway.errors import ConfigurationError, InvalidDrainRequest
from spillway.runtime import load_runtime_config

BASE = {"CLUSTER_NAME": "ml", "REGIONS": "us-east-1", "SNAPSHOTS_TABLE": "snap", "PLANS_TABLE": "plans",
        "STATE_TABLE": "state"}  # fmt: skip


def test_tenants_and_totals_come_from_planner_config_and_threshold_variables_override_it() -> None:
    config = load_runtime_config(
        {
            **BASE,
            "PLANNER_CONFIG": '{"tenants": {"team-b": {"limits": {"nvidia.com/gpu": 2}}}, "max_nodes_total": 30,'
            ' "scale_down_idle_minutes": 3, "node_reserve": {"cpu": "200m"}}',
            "SCALE_DOWN_IDLE_MINUTES": "0.05",
            "NODE_RESERVE_MEMORY": "2Gi",
        }
    ).planner
    assert config.tenants["team-b"].limits == {"nvidia.com/gpu": "2"}
    assert config.max_nodes_total == 30
    assert config.scale_down_idle_minutes == 0.05  # the variable wins
    assert (config.node_reserve.cpu, config.node_reserve.memory) == ("200m", "2Gi")
    assert (config.cluster, config.regions) == ("ml", ("us-east-1",))


def test_unset_or_empty_planner_config_is_the_defaults() -> None:
    assert load_runtime_config(BASE).planner.tenants == {}
    assert load_runtime_config({**BASE, "PLANNER_CONFIG": "{}"}).planner.max_nodes_total == 0


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ("{tenants", "PLANNER_CONFIG", "not valid JSON"),
        ("[1, 2]", "PLANNER_CONFIG", "a JSON object"),
        ('{"tenant": {}}', "PLANNER_CONFIG tenant", "unknown config key"),
        ('{"tenants": {"b": {"limits": {"cpu": "lots"}}}}', "PLANNER_CONFIG tenants.b.limits", "lots"),
        ('{"max_nodes_total": -1}', "PLANNER_CONFIG max_nodes_total", "greater than or equal to 0"),
        ('{"cluster": "other"}', "PLANNER_CONFIG cluster", "CLUSTER_NAME"),
        # a key given twice was its last value, the first lost without a word (as spillway plan --config)
        # ... named by its path, as the YAML of spillway plan --config names its lines
        (
            '{"max_nodes_total": 10, "max_nodes_total": 1000}',
            "PLANNER_CONFIG max_nodes_total",
            "'max_nodes_total' is given twice",
        ),
        (
            '{"tenants": {"a": {"limits": {"cpu": 4}}, "a": {}}}',
            "PLANNER_CONFIG tenants.a",
            "'a' is given twice",
        ),
        (
            '{"tenants": {"team-a": {"limits": {"nodes": 4, "cpu": 8, "nodes": 40}}}}',
            "PLANNER_CONFIG tenants.team-a.limits.nodes",
            "'nodes' is given twice",
        ),
        (
            '{"buffers": [{"name": "b", "pod": {}}, {"name": "c", "pod": {"cpu": 1, "cpu": 2}}]}',
            "PLANNER_CONFIG buffers.1.pod.cpu",
            "'cpu' is given twice",
        ),
        # the repeat inside the value json dropped is gone with it: the one that dropped it is named
        ('{"tenants": {"a": {"limits": {"cpu": 1, "cpu": 2}}, "a": {}}}', "PLANNER_CONFIG tenants.a", "'a'"),
        # a scope's node_selector that is no label limited nothing, and said nothing
        (
            '{"tenants": {"b": {"scopes": [{"node_selector": {"pool": "a b"}, "limits": {"nodes": 2}}]}}}',
            "PLANNER_CONFIG tenants.b.scopes.0.node_selector",
            "value 'a b' of 'pool' is not a label value",
        ),
        (
            '{"node_reserve": {"vm_memory_overhead_percent": 7.5}}',
            "PLANNER_CONFIG node_reserve.vm_memory_overhead_percent",
            "not a fraction",
        ),
    ],
)
def test_a_bad_planner_config_names_the_variable_and_the_key(value: str, field: str, words: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": value})
    assert caught.value.field == field and words in str(caught.value), str(caught.value)


LONG = "k" * 3000


@pytest.mark.parametrize(
    ("value", "field"),
    [
        # a 3,000-character key gave a 3,000-character field; a segment is cut at 64 with an ellipsis
        (f'{{"tenants": {{"{LONG}": {{}}, "{LONG}": {{}}}}}}', f"PLANNER_CONFIG tenants.{json.dumps('k' * 63 + '…')}"),
        # an empty key gave a field ending in a space and a dot
        ('{"tenants": {"": {}, "": {}}}', 'PLANNER_CONFIG tenants.""'),
        # a key with a newline put a raw newline in the field, so in the log line (log injection)
        ('{"tenants": {"a\\nERROR forged": {}, "a\\nERROR forged": {}}}', 'PLANNER_CONFIG tenants."a\\nERROR forged"'),
        ('{"tenants": {"a b": {}, "a b": {}}}', 'PLANNER_CONFIG tenants."a b"'),
        # what names need no quotes keeps none
        ('{"tenants": {"team-a.x/y_1": {}, "team-a.x/y_1": {}}}', "PLANNER_CONFIG tenants.team-a.x/y_1"),
        # ... and a validation error's key path is shown the same way
        ('{"tenants": {"a\\nb": {"limits": {"cpu": "lots"}}}}', 'PLANNER_CONFIG tenants."a\\nb".limits'),
        (f'{{"tenants": {{"{LONG}": {{"limits": {{"cpu": "lots"}}}}}}}}', f"PLANNER_CONFIG tenants.{json.dumps('k' * 63 + '…')}.limits"),
    ],
)  # fmt: skip
def test_a_planner_config_key_in_a_field_is_quoted_and_bounded(value: str, field: str) -> None:
    """The field named a key path's segments as given: unbounded, an empty one as nothing, a newline raw.
    A segment of anything but letters, digits and ``_.-/``, or empty, is JSON-quoted, and one longer
    than 64 characters is cut to 63 and an ellipsis: the field is one bounded line."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": value})
    assert caught.value.field == field
    assert "\n" not in caught.value.field and len(caught.value.field) < 120


def test_a_bad_threshold_variable_is_still_named_as_itself() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": '{"scale_down_idle_minutes": 5}',
                             "SCALE_DOWN_IDLE_MINUTES": "-1"})  # fmt: skip
    assert caught.value.field == "SCALE_DOWN_IDLE_MINUTES"


# --- poll loops that fit an execution's history (spillway.model.history) ----------------------------


@pytest.mark.parametrize(
    ("change", "variable", "words"),
    [
        # one group checked every 5 s for 7,200 s is 12,969 events; 3 rounds of 5 groups, 194,760
        ({"LAUNCH_TIMEOUT_SECONDS": "7200", "SCALE_UP_POLL_SECONDS": "5"}, "SCALE_UP_POLL_SECONDS", "1441 checks"),
        ({"LAUNCH_TIMEOUT_SECONDS": "600", "SCALE_UP_POLL_SECONDS": "0.4"}, "SCALE_UP_POLL_SECONDS", "at least 1 s"),
        ({"SCALE_UP_MAX_ROUNDS": "10", "LAUNCH_TIMEOUT_SECONDS": "1800"}, "SCALE_UP_POLL_SECONDS", "10 round(s)"),
        ({"GANG_DEADLINE_SECONDS": "86400", "GANG_POLL_SECONDS": "15"}, "GANG_POLL_SECONDS", "5761 checks"),
        ({"GANG_DEADLINE_SECONDS": "600", "GANG_POLL_SECONDS": "0"}, "GANG_POLL_SECONDS", "no pause"),
        # the README: keep gang_launch_minutes above the gang deadline, else a plan launches a gang again
        # while its first fleet is still launching (found by review: it was only said, never checked)
        ({"GANG_DEADLINE_SECONDS": "1200", "PLANNER_CONFIG": '{"gang_orphan_minutes": 60}'},
         "GANG_LAUNCH_MINUTES", "below the gang deadline"),
    ],
)  # fmt: skip
def test_poll_settings_whose_loop_outgrows_an_execution_history_are_refused(
    change: dict[str, str], variable: str, words: str
) -> None:
    """AWS fails an execution at 25,000 history events: a scale-up then never backs off nor gives back
    what it raised, a gang launch never gives its instances back. Refused when the function starts."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, **change})
    assert caught.value.field == variable and words in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    "change",
    [{}, {"LAUNCH_TIMEOUT_SECONDS": "1800", "SCALE_UP_POLL_SECONDS": "15"},
     {"LAUNCH_TIMEOUT_SECONDS": "7200", "SCALE_UP_POLL_SECONDS": "60", "SCALE_UP_MAX_ROUNDS": "2"},
     {"GANG_DEADLINE_SECONDS": "86400", "GANG_POLL_SECONDS": "60",
      "PLANNER_CONFIG": '{"gang_orphan_minutes": 1500, "gang_launch_minutes": 1440}'}],  # a day's deadline
)  # fmt: skip
def test_poll_settings_that_fit_are_accepted(change: dict[str, str]) -> None:
    assert load_runtime_config({**BASE, **change}).cluster_name == "ml"


@pytest.mark.parametrize(
    "change",
    [{"LAUNCH_TIMEOUT_SECONDS": "172800", "SCALE_UP_POLL_SECONDS": "7200"},  # 2 days
     {"LAUNCH_TIMEOUT_SECONDS": "0.4"}],  # a Wait's whole seconds: 0
)  # fmt: skip
def test_a_launch_timeout_the_scale_up_steps_would_refuse_is_refused_when_the_function_starts(
    change: dict[str, str],
) -> None:
    """The scale-up execution's input carries the launch timeout in whole seconds, and its Prepare step
    refuses one outside 1 s to a day (spillway.model.scale): accepted here, every scale-up would end in
    Errored, its pods never launched for."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, **change})
    assert caught.value.field == "LAUNCH_TIMEOUT_SECONDS", str(caught.value)


# --- observe's heartbeat: a stored snapshot, and so a plan, in every 10-minute alarm period -----------


@pytest.mark.parametrize(
    ("change", "words"),
    [({"HEARTBEAT_MINUTES": "10"}, "10 minutes"),
     ({"HEARTBEAT_MINUTES": "9.5", "OBSERVE_INTERVAL_SECONDS": "60"}, "10 minutes")],
)  # fmt: skip
def test_a_heartbeat_that_could_leave_a_ten_minute_period_without_a_plan_is_refused(
    change: dict[str, str], words: str
) -> None:
    """``held-by-limits`` reads 10-minute periods of ``PodsHeldByLimits``, which only plans emit, and a
    plan comes per stored snapshot: while nothing changes, one per heartbeat, seen up to one observation
    late. A heartbeat plus an interval above 10 minutes leaves periods with no datapoint, which
    CloudWatch counts as not breaching, so the alarm could never fire."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, **change})
    assert caught.value.field == "HEARTBEAT_MINUTES" and words in str(caught.value), str(caught.value)


def test_the_longest_heartbeat_that_keeps_a_plan_in_every_period_is_accepted() -> None:
    config = load_runtime_config({**BASE, "HEARTBEAT_MINUTES": "9.5", "OBSERVE_INTERVAL_SECONDS": "30"})
    assert config.heartbeat_minutes == 9.5


def test_a_gang_orphan_time_an_execution_could_still_attach_within_is_refused() -> None:
    """The plan terminates a fleet gang's instance in no group gang_orphan_minutes after its launch: a
    gang deadline (plus its steps' retries) that reaches past that would have live attempts' instances
    terminated before their attach."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "GANG_DEADLINE_SECONDS": "3600"})
    assert caught.value.field == "PLANNER_CONFIG" and "gang_orphan_minutes" in str(caught.value)

    fits = {**BASE, "GANG_DEADLINE_SECONDS": "3600",
            "PLANNER_CONFIG": '{"gang_orphan_minutes": 80, "gang_launch_minutes": 60}'}  # fmt: skip
    assert load_runtime_config(fits).planner.gang_orphan_minutes == 80
    with pytest.raises(ConfigurationError):
        load_runtime_config({**BASE, "PLANNER_CONFIG": '{"gang_orphan_minutes": 29}'})  # 10 min + 20


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ('{"node_reserve": "200m"}', "PLANNER_CONFIG node_reserve"),
        ('{"node_reserve": [1]}', "PLANNER_CONFIG node_reserve"),
        ('{"node_reserve": {"memory": "lots"}}', "PLANNER_CONFIG node_reserve.memory"),
        ('{"node_reserve": {"cpus": "1"}}', "PLANNER_CONFIG node_reserve.cpus"),
    ],
)
def test_planner_configs_node_reserve_beside_a_node_reserve_variable_is_checked_and_named(
    document: str, field: str
) -> None:
    """With ``NODE_RESERVE_CPU`` set, ``PLANNER_CONFIG``'s ``node_reserve`` was merged by hand: one that
    is no mapping (``"200m"``) was silently dropped (the function started with a reserve nobody wrote),
    and a bad key inside it was named as a top-level key that does not exist (``PLANNER_CONFIG memory``,
    ``PLANNER_CONFIG cpus``). Rule: bad input gets a clear error that names the field, nothing is lost
    (DESIGN.md; spillway.runtime: errors name the variable and, inside PLANNER_CONFIG, the key), as the
    same document without the variable is refused."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": document, "NODE_RESERVE_CPU": "250m"})
    assert caught.value.field == field, str(caught.value)


@pytest.mark.parametrize(
    ("variable", "document", "field"),
    [
        ("NODE_RESERVE_CPU", '{"buffers": [{"name": "a", "pod": {"cpu": "1.5.2"}, "replicas": 1}]}',
         "PLANNER_CONFIG buffers.0.pod.cpu"),
        ("NODE_RESERVE_MEMORY", '{"buffers": [{"name": "a", "pod": {"memory": "10Q"}, "replicas": 1}]}',
         "PLANNER_CONFIG buffers.0.pod.memory"),
    ],
)  # fmt: skip
def test_a_buffer_pods_cpu_or_memory_is_named_in_planner_config_though_a_node_reserve_variable_is_set(
    variable: str, document: str, field: str
) -> None:
    """A bad ``cpu`` or ``memory`` anywhere in ``PLANNER_CONFIG`` (a buffer's pod) was named as the
    ``NODE_RESERVE_CPU``/``_MEMORY`` variable whenever that was set, because only the last part of the
    error's path was compared: the operator was sent to a variable whose value is fine. Only
    ``node_reserve.cpu``/``.memory`` is the variable's."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config(
            {**BASE, "PLANNER_CONFIG": document, variable: "250m" if "CPU" in variable else "1Gi"}
        )
    assert caught.value.field == field, str(caught.value)


def test_a_planner_config_nested_too_deeply_is_refused_naming_the_variable() -> None:
    """json.loads raises RecursionError (no ValueError) past Python's recursion limit: it escaped as a
    traceback naming nothing, where ``spillway plan --config`` refuses the same document by name."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": "[" * 100_000 + "]" * 100_000})
    assert caught.value.field == "PLANNER_CONFIG" and "nested too deeply" in str(caught.value)


# --- a scale-down's drain settings: what every DrainNode execution it starts must accept ---------------


def _scale_down_drain(deadline_seconds: float, poll_seconds: float) -> dict[str, object]:
    """The drain request a plan's scale-down hands DrainNode: the deadline and poll in whole seconds, as
    spillway.act.planning writes DRAIN_DEADLINE_SECONDS and DRAIN_POLL_SECONDS into its input."""
    return {"cluster": "ml", "node": "ip-10-0-1-10.ec2.internal",
            "deadline_seconds": max(0, round(deadline_seconds)), "poll_seconds": max(0, round(poll_seconds))}  # fmt: skip


@pytest.mark.parametrize(
    ("deadline", "poll", "variable", "words"),
    [
        (
            "43200",
            "15",
            "DRAIN_POLL_SECONDS",
            "more than 800 rounds",
        ),  # 12 hours to checkpoint: 2,880 rounds
        ("1800", "2", "DRAIN_POLL_SECONDS", "more than 800 rounds"),  # 900 rounds
        ("172800", "600", "DRAIN_DEADLINE_SECONDS", "86400"),
        ("900", "7200", "DRAIN_POLL_SECONDS", "3600"),
        ("900", "0.4", "DRAIN_POLL_SECONDS", "no pause"),  # a Wait's whole seconds: 0
    ],
)
def test_drain_settings_every_scale_down_drain_would_be_rejected_for_are_refused_when_the_function_starts(
    deadline: str, poll: str, variable: str, words: str
) -> None:
    """DrainNode rejects a request whose eviction rounds would outgrow an execution's history, or whose
    deadline or poll is out of its range (spillway.model.drain, spillway.model.history), and the
    scale-down passes DRAIN_DEADLINE_SECONDS and DRAIN_POLL_SECONDS to every drain it starts. Accepted
    here, every plan's drain was rejected at validation: no idle node was ever removed, each one paid for."""
    with pytest.raises(InvalidDrainRequest):
        parse_request(_scale_down_drain(float(deadline), float(poll)))
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "DRAIN_DEADLINE_SECONDS": deadline, "DRAIN_POLL_SECONDS": poll})
    assert caught.value.field == variable and words in str(caught.value), str(caught.value)


@pytest.mark.parametrize("deadline", ["0.4", "0.5", "1e-9"])
def test_a_drain_deadline_of_no_whole_second_is_refused_naming_the_variable(deadline: str) -> None:
    """Every drain of a scale-down gets DRAIN_DEADLINE_SECONDS in whole seconds (its Wait states'), so
    0.4 was a deadline of 0 s, which the variable itself refuses (above 0); it loaded, and only a plan
    said DrainDeadlineTooShort, and only while a group consolidates when-underutilized. (The 90 s that
    problem asks for is not refused here: below it a drain still moves pods with a shorter grace and
    removes empty nodes at any deadline, and it matters only for groups a plan finds consolidating
    when-underutilized.)"""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "DRAIN_DEADLINE_SECONDS": deadline})
    assert caught.value.field == "DRAIN_DEADLINE_SECONDS" and "0 whole seconds" in str(caught.value)
    assert load_runtime_config({**BASE, "DRAIN_DEADLINE_SECONDS": "0.6"}).drain_deadline_seconds == 0.6


@pytest.mark.parametrize(
    "change",
    [{}, {"DRAIN_DEADLINE_SECONDS": "43200", "DRAIN_POLL_SECONDS": "54"},
     {"DRAIN_DEADLINE_SECONDS": "86400", "DRAIN_POLL_SECONDS": "108"}, {"DRAIN_DEADLINE_SECONDS": "30"}],
)  # fmt: skip
def test_drain_settings_that_fit_are_accepted_and_so_are_their_drains(change: dict[str, str]) -> None:
    config = load_runtime_config({**BASE, **change})
    request = parse_request(_scale_down_drain(config.drain_deadline_seconds, config.drain_poll_seconds))
    assert request.deadline_seconds == round(float(change.get("DRAIN_DEADLINE_SECONDS", "900")))


@pytest.mark.parametrize(
    ("variable", "value"),
    [("PLAN_TTL_DAYS", "inf"), ("PLAN_TTL_DAYS", "1e9"), ("SNAPSHOT_TTL_HOURS", "1e9"),
     ("SNAPSHOT_TTL_HOURS", "nan"), ("ACTIVITY_WINDOW_MINUTES", "1e9"), ("ACTIVITY_WINDOW_MINUTES", "inf"),
     ("AWS_CONNECT_TIMEOUT", "inf"), ("AWS_READ_TIMEOUT", "1e15"), ("MAX_SNAPSHOT_AGE_SECONDS", "inf")],
)  # fmt: skip
def test_a_duration_no_clock_or_socket_can_hold_is_refused_naming_its_variable(
    variable: str, value: str
) -> None:
    """These were accepted, and then every invocation failed naming none of them: a TTL or an activity
    window past what a date holds raised OverflowError building the stores or writing a snapshot (the
    snapshot's expiry, ``taken_at`` + the TTL, past year 9999), an infinite SDK timeout made every AWS
    call fail (HTTPClientError: timestamp out of range). Refused when the function starts, as every
    other bad variable is."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, variable: value})
    assert caught.value.field == variable, str(caught.value)


def test_long_durations_that_fit_are_accepted_and_usable() -> None:
    config = load_runtime_config({**BASE, "PLAN_TTL_DAYS": "3650", "SNAPSHOT_TTL_HOURS": "8760",
                                  "ACTIVITY_WINDOW_MINUTES": "60480", "AWS_MAX_ATTEMPTS": "1",
                                  "AWS_READ_TIMEOUT": "45"})  # fmt: skip
    assert config.plan_ttl.days == 3650 and config.snapshot_ttl.days == 365
    assert config.activity_window.days == 42


@pytest.mark.parametrize("deadline", [None, "60", "1800"])
def test_the_planner_is_given_the_deadline_its_plans_drains_run_with(deadline: str | None) -> None:
    """The scale-down passes DRAIN_DEADLINE_SECONDS to every drain; the planner counts on a terminating
    pod's room only when it is gone within that deadline (spillway.planner.disruption.leaving_within).
    It kept 2 minutes whatever the variable said, so under a 60 s deadline a drain waited for such a pod
    and timed out."""
    config = load_runtime_config({**BASE, **({"DRAIN_DEADLINE_SECONDS": deadline} if deadline else {})})

    assert config.planner.drain_deadline_seconds == config.drain_deadline_seconds == float(deadline or 900)


def test_the_drain_deadline_in_planner_config_is_refused_naming_its_variable() -> None:
    """One deadline: the drains' own, from DRAIN_DEADLINE_SECONDS; another in PLANNER_CONFIG would have
    the planner judge by a deadline no drain runs with."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": '{"drain_deadline_seconds": 60}'})
    assert caught.value.field == "PLANNER_CONFIG drain_deadline_seconds"
    assert "DRAIN_DEADLINE_SECONDS" in str(caught.value)


@pytest.mark.parametrize("regions", ["not-a-region", "-", "us-east-1,eu-west", "us-east-1a"])
def test_regions_that_are_no_aws_region_are_refused_at_start(regions: str) -> None:
    """REGIONS took any name of lower-case letters, digits and dashes, so ``not-a-region`` started the
    functions, which then called an endpoint that does not exist on every tick; a zone (``us-east-1a``)
    passed too. The functions read a region as the rest of the code does (model.aws.REGION_FORM)."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "REGIONS": regions})
    assert caught.value.field == "REGIONS"


def test_every_kind_of_aws_region_name_is_still_taken() -> None:
    config = load_runtime_config({**BASE, "REGIONS": "us-east-1,us-gov-west-1,cn-north-1,eusc-de-east-1"})
    assert config.regions == ("us-east-1", "us-gov-west-1", "cn-north-1", "eusc-de-east-1")


def test_a_long_key_given_twice_is_named_in_a_bounded_message_that_still_says_what_is_wrong() -> None:
    """The message was cut at 200 characters after quoting the key whole, so a key of 3,000 characters
    left only the key's start: what was wrong ("is given twice") was cut off. The key is now cut as the
    field cuts it, and the message keeps its end."""
    key = "k" * 3000
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": f'{{"{key}": 1, "{key}": 2}}'})
    assert "is given twice in one object" in str(caught.value)
    assert "k" * 64 not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "variable"),
    [({"AWS_READ_TIMEOUT": "10"}, "AWS_READ_TIMEOUT"), ({"AWS_MAX_ATTEMPTS": "5"}, "AWS_MAX_ATTEMPTS"),
     ({"AWS_CONNECT_TIMEOUT": "10"}, "AWS_CONNECT_TIMEOUT"),
     ({"AWS_CONNECT_TIMEOUT": "10", "AWS_MAX_ATTEMPTS": "3"}, "AWS_CONNECT_TIMEOUT")],
)  # fmt: skip
def test_sdk_settings_whose_call_cannot_fit_twice_in_a_scale_step_are_refused_naming_a_variable_set(
    change: dict[str, str], variable: str
) -> None:
    """A scale step writes a raise marker only with time to ask the raise or give the marker back, each
    call at its longest (spillway.model.calltime): settings under which that never fits in the scale
    function's 120 s would refuse every raise, so the functions refuse them when they start. The
    variable named is the first set above its default of AWS_MAX_ATTEMPTS, AWS_READ_TIMEOUT,
    AWS_CONNECT_TIMEOUT, else the first set."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, **change})
    assert caught.value.field == variable, str(caught.value)
    assert "the scale function's Timeout, 120 s" in str(caught.value)


def test_the_default_sdk_settings_fit_and_so_do_fewer_attempts_of_a_longer_read() -> None:
    config = load_runtime_config(BASE)
    assert (config.aws_max_attempts, config.aws_connect_timeout, config.aws_read_timeout) == (3, 3, 7)
    longer = load_runtime_config({**BASE, "AWS_MAX_ATTEMPTS": "2", "AWS_READ_TIMEOUT": "15"})
    assert longer.aws_read_timeout == 15


@pytest.mark.parametrize(
    ("change", "variable", "fits"),
    [({"AWS_MAX_ATTEMPTS": "5"}, "AWS_MAX_ATTEMPTS", "AWS_MAX_ATTEMPTS at most 3"),
     ({"AWS_MAX_ATTEMPTS": "3", "AWS_READ_TIMEOUT": "30"}, "AWS_READ_TIMEOUT", "AWS_MAX_ATTEMPTS at most 1"),
     ({"AWS_READ_TIMEOUT": "10"}, "AWS_READ_TIMEOUT", "AWS_MAX_ATTEMPTS at most 2"),
     ({"AWS_CONNECT_TIMEOUT": "3", "AWS_READ_TIMEOUT": "60"}, "AWS_READ_TIMEOUT", "no AWS_MAX_ATTEMPTS fits")],
)  # fmt: skip
def test_a_refused_sdk_setting_names_the_variable_raised_and_says_what_fits(
    change: dict[str, str], variable: str, fits: str
) -> None:
    """A user who kept a value the old build allowed (AWS_MAX_ATTEMPTS 5, AWS_READ_TIMEOUT 10) finds every
    function refusing to start: the error names the variable set above its default, not one set to the
    default beside it, and says how many attempts fit with the timeouts given, so the fix is plain."""
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, **change})
    assert caught.value.field == variable, str(caught.value)
    assert fits in str(caught.value)
