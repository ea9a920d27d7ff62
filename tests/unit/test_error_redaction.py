"""No credential leaves a function in an error's text other than through logging either: what a handler
lets escape is written by the Lambda runtime itself (awslambdaric's ``handle_event_request``: the error
response's ``errorMessage`` is ``str(value)``, its ``errorType`` ``type(value).__name__``, its
``stackTrace`` the frames), which becomes a Step Functions task's ``Cause`` and ``Error`` and the
execution's ``ExecutionFailed`` event; what a handler returns is a state's output in the execution's
history. Both go through the same redaction as a log line, the error keeping its class (the state
machines' Retry and Catch match ``errorType``)."""

from __future__ import annotations

import json
import logging
import secrets
import sys
import traceback
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from fakes import FakeCloud, FakeCluster, FakeSnapshots
from lambda_apps import LambdaContext, load_app

from spillway import observability
from spillway.errors import InputError, KubeUnavailable, ListExpired, ObservationFailed
from spillway.local import objects as o
from spillway.observe import ObserveConfig, run_observe

FUNCTIONS = ("observe", "plan", "scale", "drain", "interrupt")
# each function's work, which the handler calls once its clients are built
WORK = {
    "observe": "observe_tick",
    "plan": "plan_event",
    "scale": "scale_step",
    "drain": "handle",
    "interrupt": "process_batch",
}


def _credentials() -> dict[str, str]:
    return {
        "bearer": secrets.token_urlsafe(32),
        "exec": "k8s-aws-v1." + secrets.token_urlsafe(60),
        "exec_plain": secrets.token_hex(20),
        "client_key": "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo" + secrets.token_hex(16),
        "aws_secret": secrets.token_urlsafe(30) + "/" + secrets.token_hex(5),
        "session": "FwoGZXIvYXdzEJr" + secrets.token_hex(24),
    }


def _quoting(found: dict[str, str]) -> str:
    """An error text as a library writes one, quoting each credential as it comes."""
    return (
        f"(401) Reason: Unauthorized; HTTP request headers: {{'Authorization': 'Bearer {found['bearer']}'}}; "
        f"exec plugin: {found['exec']}; "
        f'ExecCredential: {{"kind": "ExecCredential", "status": {{"token": "{found["exec_plain"]}"}}}}; '
        f"kubeconfig: client-key-data: {found['client_key']}; "
        f"aws_secret_access_key = {found['aws_secret']}; "
        f'{{"SecretAccessKey": "{found["aws_secret"]}", "SessionToken": "{found["session"]}"}}'
    )


@pytest.fixture
def credentials() -> dict[str, str]:
    return _credentials()


@pytest.fixture(autouse=True)
def _no_default_dimensions() -> Iterator[None]:
    yield
    observability.metrics.clear_default_dimensions()


def _runtime_error_record(exc: BaseException) -> str:
    """The error response the Lambda runtime posts (and logs) for an exception a handler let escape."""
    frames = [(f.filename, f.lineno, f.name, f.line) for f in traceback.extract_tb(exc.__traceback__)]
    return json.dumps(
        {
            "errorMessage": str(exc),
            "errorType": type(exc).__name__,
            "stackTrace": traceback.format_list(frames),
        }
    )


def _clients() -> Any:
    return SimpleNamespace(config=SimpleNamespace(cluster_name="ml"), interrupter=lambda *a: None)


def test_an_aws_secret_key_and_session_token_in_a_text_are_redacted(credentials: dict[str, str]) -> None:
    """A credentials file's ``aws_secret_access_key``, the environment's ``AWS_SECRET_ACCESS_KEY`` and
    STS's ``Credentials`` answer (``SecretAccessKey``, ``SessionToken``), as a text quotes them."""
    text = (
        _quoting(credentials) + f" AWS_SECRET_ACCESS_KEY={credentials['aws_secret']} aws_session_token=abc1"
    )
    cleaned = observability.redact(text)
    assert all(value not in cleaned for value in credentials.values()), cleaned
    assert "aws_session_token=<redacted>" in cleaned and '"SecretAccessKey": "<redacted>"' in cleaned


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("function", FUNCTIONS)
def test_an_error_a_handler_lets_escape_carries_no_credential_and_keeps_its_class(
    function: str, credentials: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the runtime writes for it (the function's error, a task's Cause) quotes none, under the same
    errorType, and it is still the error it was for whoever catches it (its class, its fields)."""
    app = load_app(function, "redacted")

    def refused() -> Any:
        raise InputError(_quoting(credentials), field="cluster")

    monkeypatch.setattr(app, "get_clients", refused)
    with pytest.raises(InputError) as caught:
        app.handler({"action": "evict"}, LambdaContext())
    record = _runtime_error_record(caught.value)
    assert all(value not in record for value in credentials.values()), record
    assert json.loads(record)["errorType"] == "InputError" and caught.value.field == "cluster"
    assert "Bearer <redacted>" in str(caught.value)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("function", FUNCTIONS)
def test_what_a_handler_returns_carries_no_credential(
    function: str, credentials: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's answer (a state's output in the execution's history) quoting an error's text."""
    app = load_app(function, "redacted")
    answer = {
        "group": "east",
        "note": _quoting(credentials),
        "errors": [f"token: {credentials['exec_plain']}"],
    }
    monkeypatch.setattr(app, "get_clients", _clients)
    monkeypatch.setattr(app, WORK[function], lambda *args: answer)
    out = app.handler({"action": "evict"}, LambdaContext())
    assert all(value not in json.dumps(out) for value in credentials.values()), out
    assert out["group"] == "east" and out["errors"] == ["token: <redacted>"]


def test_an_answer_keeps_a_word_an_exec_plugins_short_secret_happens_to_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A short secret a flag gave is blanked where it stands as a word in a text, but an answer's value
    that is that word alone is a name (a group, a region) the state machine goes on with."""
    monkeypatch.setattr(observability, "_words", frozenset())
    monkeypatch.setattr(observability, "_words_pattern", None)
    observability.add_secret_words(["east"])
    wrapped = observability.redacting(lambda: {"group": "east", "note": "login --password east refused"})
    assert wrapped() == {"group": "east", "note": "login --password <redacted> refused"}


def _exec_env_kubeconfig(env: dict[str, str]) -> dict[str, Any]:
    """A kubeconfig whose exec plugin is given ``env`` (each value taken whole as a secret)."""
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "get-token",
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    return {"users": [{"name": "u", "user": {"exec": plugin}}]}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("function", ["plan", "scale"])
def test_an_answers_name_an_exec_env_value_happens_to_be_is_kept_and_a_text_quoting_it_is_not(
    function: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exec plugin's env value is blanked by value wherever it appears, whatever it is: here one names
    the cluster (CLUSTER_NAME=ml-production), the very name a plan's or a scale step's answer carries for
    the next state, which got <redacted> and broke it. A name is no credential and an answer carries
    none as a field: a one-word answer text keeps a known value shaped like a name (a group named after
    the cluster too). A multi-word text quoting it is redacted still, and so is a one-word text holding
    a value no name is shaped like (a token's random letters and digits)."""
    from spillway.adapters.kube import kubeconfig_secrets

    monkeypatch.setattr(observability, "_known", frozenset())
    monkeypatch.setattr(observability, "_known_pattern", None)
    monkeypatch.setattr(observability, "_opaque_pattern", None)
    token = secrets.token_urlsafe(24)
    observability.add_secret_values(
        kubeconfig_secrets(_exec_env_kubeconfig({"CLUSTER_NAME": "ml-production", "API_TOKEN": token}))
    )
    app = load_app(function, "redacted_names")
    answer = {
        "cluster": "ml-production",
        "group": "ml-production-gpu-east",
        "problem": "cluster ml-production refused the call",
        "marker": f"v1.{token}",
    }
    monkeypatch.setattr(app, "get_clients", _clients)
    monkeypatch.setattr(app, WORK[function], lambda *args: answer)

    out = app.handler({"action": "evict"}, LambdaContext())

    assert (out["cluster"], out["group"]) == ("ml-production", "ml-production-gpu-east")
    assert out["problem"] == "cluster <redacted> refused the call"
    assert out["marker"] == "v1.<redacted>"


# names an answer's one-word text carries, and known values of those shapes
NAME_SHAPED = [
    "ml-production", "us-east-1", "p4d.24xlarge", "123456789012", "MLProd-gpu_east",
    "ip-10-0-1-23.ec2.internal", "deadbeef",
]  # fmt: skip
# credentials' shapes: a static token's base64url, hex, a key's base64 ("+", "/", "="), a JWT, a Kubernetes
# bootstrap token (lower case and digits, but alternating), a password mixing cases within a word, and a
# UUID (a service principal's password as `az ad sp create-for-rbac` gave it, a Heroku API key) whose
# five hex groups happen to alternate no more than a name's parts do
OPAQUE = [
    "Xk9fQ2pL7mZbT4wR", "9f86d081884c7d659a2feaa0c55ad015", "LS0tLS1CRUdJTiBSU0E+a/b=",
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "07401b.f395accd246ae52d", "hunter2Hunter2",
    "e2527011-460b-4b79-b137-e94220357098", "E2527011-460B-4B79-B137-E94220357098",
]  # fmt: skip


@pytest.mark.parametrize("value", NAME_SHAPED + OPAQUE)
def test_an_answers_one_word_text_keeps_a_known_value_only_when_it_is_shaped_like_a_name(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known by value (an exec env value taken whole), a value is blanked in every multi-word text; in an
    answer's one-word text only when no name could be it (its letters and digits alternate as a random
    credential's do, or it holds a character no name has)."""
    monkeypatch.setattr(observability, "_known", frozenset())
    monkeypatch.setattr(observability, "_known_pattern", None)
    monkeypatch.setattr(observability, "_opaque_pattern", None)
    observability.add_secret_values([value])
    answer = observability.redacted_answer({"name": value, "in": f"x-{value}", "text": f"saw {value}"})
    kept = value in NAME_SHAPED
    assert answer["name"] == (value if kept else "<redacted>")
    assert answer["in"] == (f"x-{value}" if kept else "x-<redacted>")
    assert answer["text"] == "saw <redacted>"


def test_a_batch_error_quoting_its_records_errors_is_redacted_whole(credentials: dict[str, str]) -> None:
    """Powertools' BatchProcessingError says every failed record's traceback in its text."""
    try:
        raise KubeUnavailable(f"Authorization: Bearer {credentials['bearer']}")
    except KubeUnavailable:
        failed = sys.exc_info()

    def batch() -> None:
        raise BatchProcessingError("every record of the batch failed (1)", [failed])  # type: ignore[list-item]

    with pytest.raises(BatchProcessingError) as caught:
        observability.redacting(batch)()
    assert credentials["bearer"] not in _runtime_error_record(caught.value)
    assert "KubeUnavailable: Authorization: Bearer <redacted>" in str(caught.value)


def test_an_escaping_errors_causes_are_redacted_and_one_quoting_nothing_is_raised_as_it_is(
    credentials: dict[str, str],
) -> None:
    def chained() -> None:
        try:
            raise ValueError(f"token: {credentials['exec_plain']}")
        except ValueError as exc:
            raise KubeUnavailable("list nodes failed") from exc

    with pytest.raises(KubeUnavailable) as caught:
        observability.redacting(chained)()
    text = "".join(traceback.format_exception(caught.value))
    assert credentials["exec_plain"] not in text and "ValueError: token: <redacted>" in text

    plain = KubeUnavailable("list nodes: 503")

    def unavailable() -> None:
        raise plain

    with pytest.raises(KubeUnavailable) as same:
        observability.redacting(unavailable)()
    assert same.value is plain


CONFIG = ObserveConfig(cluster="ml", interval_seconds=20, heartbeat_minutes=5, carry_unread_minutes=15)


@pytest.mark.parametrize("error", [KubeUnavailable, ListExpired])
def test_an_observation_failed_quotes_no_credential_of_the_error_it_failed_for(
    error: type[Exception], credentials: dict[str, str]
) -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    kube = FakeCluster([o.node("ip-10-0-1-10.ec2.internal", instance="i-0e", zone="us-east-1a")], [])
    kube.fail("iter_nodes", error(_quoting(credentials)))
    with pytest.raises(ObservationFailed) as caught:
        run_observe(kube, FakeCloud(cluster="ml"), FakeSnapshots(), CONFIG, lambda: now, lambda s: None, now)
    assert all(value not in str(caught.value) for value in credentials.values()), str(caught.value)
    assert "Bearer <redacted>" in str(caught.value)


def _logged(extra: dict[str, Any]) -> tuple[logging.LogRecord, str]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    library = logging.getLogger("some.library.keys")
    keep = Keep()
    library.addHandler(keep)
    library.setLevel(logging.INFO)
    try:
        library.info("request sent", extra=extra)
    finally:
        library.removeHandler(keep)
    [record] = records
    return record, json.dumps({k: v for k, v in record.__dict__.items() if k in extra})


def test_a_dict_valued_log_field_is_redacted_by_its_keys_too() -> None:
    """A value no pattern knows is still blanked under a key named like a credential, in dicts and lists
    at any depth, whatever the key's case; the other keys stay."""
    record, text = _logged(
        {
            "headers": {"Authorization": "Basic dXNlcjpwYXNz", "Accept": "application/json"},
            "token": "abc",
            "users": [{"name": "dev", "user": {"Password": "hunter2", "client-key-data": "LS0tabc"}}],
            "credentials": {"SecretAccessKey": "wJalr", "SessionToken": "Fwo", "AccessKeyId": "AKIAEXAMPLE"},
        }
    )
    for value in ("dXNlcjpwYXNz", '"abc"', "hunter2", "LS0tabc", "wJalr", 'Fwo"'):
        assert value not in text, text
    assert record.__dict__["headers"]["Accept"] == "application/json"
    assert record.__dict__["users"][0]["name"] == "dev"
    assert record.__dict__["credentials"]["AccessKeyId"] == "AKIAEXAMPLE"
    assert record.__dict__["token"] == observability.REDACTED


def test_a_powertools_lines_field_is_redacted_by_its_keys_too() -> None:
    """Keys appended to the Powertools logger are the formatter's to redact."""
    import io

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(observability.logger.registered_formatter)
    inner = observability.logger._logger
    inner.addHandler(handler)
    observability.logger.append_keys(auth={"password": "hunter2", "user": "dev"})
    try:
        observability.logger.info("observed")
    finally:
        observability.logger.remove_keys(["auth"])
        inner.removeHandler(handler)
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["auth"] == {"password": observability.REDACTED, "user": "dev"}


def test_a_scaled_objects_problem_quoting_a_credential_is_redacted(credentials: dict[str, str]) -> None:
    """A buffer's scalable object that could not be read is the buffer's problem: stored in the snapshot
    and written to the CapacityBuffer's status, both outliving any log line."""
    from spillway.errors import KubeAuthError
    from spillway.observe import _scaled

    class Refusing:
        def get_scale(self, *args: Any) -> Any:
            raise KubeAuthError(f"get scale: 401 Authorization: Bearer {credentials['bearer']}")

    found = _scaled(Refusing(), "ml", "apps", "Deployment", "web")  # type: ignore[arg-type]
    assert found.problem is not None and credentials["bearer"] not in found.problem
    assert found.problem.endswith("Bearer <redacted>")


@pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time:UserWarning")
def test_a_plans_answer_kept_in_the_idempotency_table_carries_no_credential(
    credentials: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Powertools keeps a plan's answer in the idempotency table (its COMPLETED record's response data)
    for an hour, where a failed pod Event's error text would outlive every log line."""
    from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
    from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

    from spillway.model.act import SnapshotRef

    class Kept(BasePersistenceLayer):
        def __init__(self) -> None:
            super().__init__()
            self.records: dict[str, DataRecord] = {}

        def _get_record(self, idempotency_key: str) -> DataRecord:
            return self.records[idempotency_key]

        def _put_record(self, data_record: DataRecord) -> None:
            self.records[data_record.idempotency_key] = data_record

        def _update_record(self, data_record: DataRecord) -> None:
            self.records[data_record.idempotency_key] = data_record

        def _delete_record(self, data_record: DataRecord) -> None:
            self.records.pop(data_record.idempotency_key, None)

    app = load_app("plan", "redacted_kept")
    failed = f"web-0: KubeAuthError: 401 Authorization: Bearer {credentials['bearer']}"
    outcome = SimpleNamespace(to_dict=lambda: {"status": "resumed", "events": {"errors": [failed]}})
    monkeypatch.setattr(app, "run_plan", lambda *args, **kwargs: outcome)
    kept = Kept()
    clients = SimpleNamespace(
        idempotency=kept,
        snapshots=None,
        state=None,
        executions=None,
        cluster=None,
        plan_settings=lambda: None,
    )
    app.plan_once(clients, SnapshotRef("ml", "2026-11-02T10:00:00Z"), None)
    [record] = kept.records.values()
    assert credentials["bearer"] not in record.response_data and "Bearer <redacted>" in record.response_data


class Where(NamedTuple):
    """A field an error or a log line may carry: a named tuple, whose constructor takes its fields one by
    one (not one iterable, as a tuple's does)."""

    url: str
    status: int


class Refused(Exception):
    def __init__(self, message: str, where: Where) -> None:
        super().__init__(message)
        self.where = where


def test_an_escaping_error_holding_a_named_tuple_keeps_its_class_and_its_fields(
    credentials: dict[str, str],
) -> None:
    """An attribute that is a named tuple is redacted as one (its fields its items): the error is still
    of its class for whoever catches it, not a stand-in of its name only."""
    where = Where(f"https://api/?token: {credentials['exec_plain']}", 401)

    def refused() -> None:
        raise Refused(f"Authorization: Bearer {credentials['bearer']}", where)

    with pytest.raises(Refused) as caught:
        observability.redacting(refused)()
    assert credentials["bearer"] not in str(caught.value)
    assert caught.value.where == Where("https://api/?token: <redacted>", 401)


def test_a_log_field_holding_a_named_tuple_is_redacted_not_raised() -> None:
    """The filter runs inside the logging call: a field it cannot rebuild would make that call raise."""
    record = logging.LogRecord("some.library", logging.INFO, __file__, 1, "sent", None, None)
    record.where = Where("token: s3cr3t-value", 200)
    assert observability.RedactSecrets().filter(record)
    assert record.where == Where("token: <redacted>", 200)


def test_an_escaping_error_quoting_a_credential_is_not_the_context_of_its_redacted_copy(
    credentials: dict[str, str],
) -> None:
    """The copy is raised outside the ``except`` that caught the original: raised inside it, Python would
    make the original (the secret in its text) its context, which a traceback of it prints."""

    def quoting() -> None:
        raise InputError(f"token: {credentials['exec_plain']}", field="cluster")

    with pytest.raises(InputError) as caught:
        observability.redacting(quoting)()
    assert caught.value.__context__ is None
    assert credentials["exec_plain"] not in "".join(traceback.format_exception(caught.value))
