"""No credential reaches a log, at any level: the kubeconfig token read from Secrets Manager and the EKS
IAM token (with its SigV4 signature and session token) are sent to the API emulator by the real
kubernetes client while botocore, urllib3 and kubernetes log at DEBUG, and appear in no record."""

from __future__ import annotations

import base64
import io
import json
import logging
import secrets
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from spillway import observability
from spillway.adapters.aws import map_aws_error
from spillway.adapters.eks_auth import TOKEN_PREFIX, EksTokenProvider
from spillway.adapters.kube import KubeClient
from spillway.local import objects as kobj
from spillway.local.kubeapi import KubeApiServer

REGION = "us-east-1"
SESSION_TOKEN = "FwoGZXIvYXdzEJr" + secrets.token_hex(24)


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """Everything any logger emits at DEBUG and above, formatted with exceptions, in one buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    noisy = [logging.getLogger(n) for n in ("botocore", "boto3", "urllib3", "kubernetes")]
    levels = [n.level for n in noisy]
    for each in noisy:
        each.setLevel(logging.DEBUG)
    observability.install_redaction()  # (already done on import; handlers added since get it too)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)
        for each, level in zip(noisy, levels, strict=True):
            each.setLevel(level)


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    srv = KubeApiServer().start()
    srv.add(kobj.node("n1", instance=kobj.instance_id("n1")))
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield


def test_a_kubeconfig_token_from_secrets_manager_never_reaches_a_log(
    aws: None, server: KubeApiServer, debug_log: io.StringIO, capfd: pytest.CaptureFixture[str]
) -> None:
    token = "kc-" + secrets.token_urlsafe(24)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    arn = boto3.client("secretsmanager").create_secret(
        Name="kubeconfig", SecretString=json.dumps(kubeconfig)
    )["ARN"]
    server.require_token = token

    kube = KubeClient.from_secret(arn, region=REGION)
    try:
        assert [n.metadata.name for n in kube.list_nodes()] == ["n1"]
        assert kube.cordon("n1", reason="test")
    finally:
        kube.close()

    assert server.requests[-1].token == token  # the token really was used
    logged = debug_log.getvalue()
    assert "SecretString" in logged  # botocore logged the secret's response body ...
    assert "urllib3" in logged or "kubernetes" in logged  # ... and the HTTP side logged too
    out, err = capfd.readouterr()
    for where in (logged, out, err):
        assert token not in where
    assert observability.REDACTED in logged


def test_an_eks_token_its_signature_and_session_token_never_reach_a_log(
    aws: None, server: KubeApiServer, debug_log: io.StringIO, capfd: pytest.CaptureFixture[str]
) -> None:
    provider = EksTokenProvider("ml", REGION, boto3.Session())
    token = provider.token()
    server.require_token = token

    kube = KubeClient.for_url(server.url, token=provider.token)
    try:
        assert [n.metadata.name for n in kube.list_nodes()] == ["n1"]
    finally:
        kube.close()

    assert server.requests[-1].token == token
    url = base64.urlsafe_b64decode(token.removeprefix(TOKEN_PREFIX) + "==").decode()
    query = parse_qs(urlsplit(url).query)
    [signature] = query["X-Amz-Signature"]
    logged = debug_log.getvalue()
    assert "Signature" in logged  # botocore logged the signing (canonical request, signature) ...
    out, err = capfd.readouterr()
    for where in (logged, out, err):
        assert token not in where and token.removeprefix(TOKEN_PREFIX) not in where
        assert signature not in where  # ... with the signature blanked: the URL cannot be rebuilt
        assert SESSION_TOKEN not in where


def test_extra_fields_and_arguments_are_redacted_on_every_logger(debug_log: io.StringIO) -> None:
    records: list[logging.LogRecord] = []
    collect = logging.Handler()
    collect.emit = records.append  # type: ignore[method-assign]
    root = logging.getLogger()
    root.addHandler(collect)
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    try:
        logging.getLogger("some.library").debug("header %s", {"Authorization": f"Bearer {secret}"})
        logging.getLogger("spillway.test").info(
            "cfg", extra={"kubeconfig": f"users:\n- user:\n    token: {secret}"}
        )
        observability.logger.info("powertools", extra={"auth": f"Bearer {secret}"})
    finally:
        root.removeHandler(collect)
    assert "header {'Authorization': 'Bearer <redacted>'}" in debug_log.getvalue()
    by_message = {r.getMessage(): r for r in records}
    assert by_message["cfg"].kubeconfig == "users:\n- user:\n    token: <redacted>"
    assert by_message["powertools"].auth == "Bearer <redacted>"
    assert all(secret not in repr(r.__dict__) for r in records)


def test_ordinary_messages_are_left_alone() -> None:
    for text in ("listed 3 nodes in 2 pages", "token bucket refilled", "next_token: abc", "signature: short"):
        assert observability.redact(text) == text


def test_no_value_of_a_kubeconfig_secret_reaches_a_log_whatever_its_keys(
    aws: None, server: KubeApiServer, debug_log: io.StringIO, capfd: pytest.CaptureFixture[str]
) -> None:
    """botocore logs GetSecretValue's response body at DEBUG: the whole secret. A kubeconfig's users
    hold credentials under more keys than ``token`` and ``password``: an OIDC auth-provider's
    ``client-secret``, an Azure one's ``access-token``, an exec plugin's ``env`` values (AWS keys, API
    tokens). The secret's value is blanked whole, whatever it holds."""
    used = "kc-" + secrets.token_urlsafe(24)
    client_secret, access_token, env_secret = (secrets.token_urlsafe(24) for _ in range(3))
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "users": [
            {"name": "u", "user": {"token": used}},
            {"name": "oidc", "user": {"auth-provider": {"name": "oidc", "config": {
                "client-id": "kubernetes", "client-secret": client_secret,
                "idp-issuer-url": "https://issuer.example.com"}}}},
            {"name": "azure", "user": {"auth-provider": {"name": "azure", "config": {
                "access-token": access_token, "apiserver-id": "6dae42f8"}}}},
            {"name": "exec", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "get-token",
                "env": [{"name": "API_KEY", "value": env_secret}]}}},
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }  # fmt: skip
    arn = boto3.client("secretsmanager").create_secret(
        Name="kubeconfig", SecretString=json.dumps({"kubeconfig": yaml.safe_dump(kubeconfig)})
    )["ARN"]
    server.require_token = used

    kube = KubeClient.from_secret(arn, region=REGION)
    try:
        assert [n.metadata.name for n in kube.list_nodes()] == ["n1"]
    finally:
        kube.close()

    logged = debug_log.getvalue()
    assert "SecretString" in logged  # botocore logged the secret's response body
    out, err = capfd.readouterr()
    for where in (logged, out, err):
        for value in (used, client_secret, access_token, env_secret):
            assert value not in where


def test_an_aws_refusal_that_quotes_the_signed_request_carries_no_session_token_into_our_error(
    aws: None,
) -> None:
    """AWS answers a signature mismatch with the canonical request it expected, headers and all, the
    ``x-amz-security-token`` among them (public reports show the message: amzn/selling-partner-api-models
    #1900). The error a step raises is not a log record: its message is the Lambda's errorMessage, the
    Step Functions Cause, a Node's Event, a group's back-off reason. It carries no session token."""
    client = boto3.client("autoscaling", region_name=REGION)
    message = (
        "The request signature we calculated does not match the signature you provided. Check your AWS "
        "Secret Access Key and signing method.\n\nThe Canonical String for this request should have been\n"
        "'POST\n/\n\ncontent-type:application/x-www-form-urlencoded; charset=utf-8\n"
        "host:autoscaling.us-east-1.amazonaws.com\nx-amz-date:20261205T101500Z\n"
        f"x-amz-security-token:{SESSION_TOKEN}\n\ncontent-type;host;x-amz-date;x-amz-security-token\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'"
    )
    with Stubber(client) as stub:
        stub.add_client_error("set_desired_capacity", "SignatureDoesNotMatch", message, http_status_code=403)
        with pytest.raises(ClientError) as raised:
            client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=3)
    error = map_aws_error(raised.value, "SetDesiredCapacity(gpu, 3)")
    assert "SignatureDoesNotMatch" in str(error) and "x-amz-security-token" in str(error)
    assert SESSION_TOKEN not in str(error)


class _IdentityProvider:
    """An OIDC provider on localhost: its discovery document, and a token endpoint that answers a
    refresh-token grant with new tokens (RFC 6749 section 6; the ID token of OpenID Connect Core 12.2)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                self._answer({"issuer": provider.url, "token_endpoint": provider.url + "/token"})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer({"token_type": "Bearer", "expires_in": 3600, **tokens})

            def _answer(self, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> _IdentityProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _jwt(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.{secrets.token_hex(8)}"


def test_an_oidc_refresh_of_a_kubeconfig_user_leaves_none_of_its_credentials_in_a_log(
    server: KubeApiServer,
    debug_log: io.StringIO,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kubeconfig user of the oidc auth-provider whose id-token has expired: the kubernetes client
    refreshes it at the provider's token endpoint (requests-oauthlib's OAuth2Session.refresh_token),
    which logs at DEBUG the client secret it adds, the request body (refresh_token=...&client_secret=...)
    and the answer (access_token, id_token, refresh_token). The redaction knew the kubeconfig's
    hyphenated keys after a colon only, so every one of these reached the log."""
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the provider is plain http on localhost
    client_secret, refresh_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    issued = {
        "access_token": secrets.token_urlsafe(24),
        "refresh_token": secrets.token_urlsafe(24),
        "id_token": _jwt({"sub": "spillway", "exp": 4102444800}),
    }
    with _IdentityProvider(issued) as idp:
        user = {"auth-provider": {"name": "oidc", "config": {
            "client-id": "kubernetes", "client-secret": client_secret, "idp-issuer-url": idp.url,
            "id-token": _jwt({"sub": "spillway", "exp": 1}), "refresh-token": refresh_token}}}  # fmt: skip
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "ctx",
        }
        server.require_token = issued["id_token"]
        kube = KubeClient.from_kubeconfig(kubeconfig)
        try:
            assert [n.metadata.name for n in kube.list_nodes()] == ["n1"]
        finally:
            kube.close()

    assert server.requests[-1].token == issued["id_token"]  # refreshed, and used
    logged = debug_log.getvalue()
    assert "refresh" in logged  # requests-oauthlib logged the refresh ...
    out, err = capfd.readouterr()
    for where in (logged, out, err):
        for value in (client_secret, refresh_token, *issued.values()):
            assert value not in where  # ... and none of the credentials it handled


def _failing_exec_kubeconfig(server: KubeApiServer, env: dict[str, str], echoed: str) -> dict[str, object]:
    """A kubeconfig whose user's exec plugin, given ``env``, prints the variable ``echoed`` to its stderr
    and fails."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh",
            "args": ["-c", f'echo "refused ${echoed}" >&2; exit 1'],
            "env": [{"name": k, "value": v} for k, v in env.items()]}}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }  # fmt: skip


def test_an_exec_plugin_that_fails_quoting_its_credentials_leaves_none_in_a_log(
    server: KubeApiServer, debug_log: io.StringIO, capfd: pytest.CaptureFixture[str]
) -> None:
    """An exec plugin that fails: the kubernetes client logs its exit code and stderr at ERROR, and a
    plugin that echoes what it was given (an API key from its env, a token from its args) puts that in
    the line, with no key the patterns could know it by."""
    api_key = "key-" + secrets.token_urlsafe(24)
    KubeClient.from_kubeconfig(_failing_exec_kubeconfig(server, {"API_KEY": api_key}, "API_KEY")).close()

    logged = debug_log.getvalue()
    assert "exec: process returned 1" in logged  # the client logged the plugin's failure ...
    out, err = capfd.readouterr()
    for where in (logged, out, err):
        assert api_key not in where  # ... without the key it echoed


def test_an_exec_plugins_aws_settings_are_not_blanked_from_every_line(
    server: KubeApiServer,
    debug_log: io.StringIO,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An aws-iam-authenticator user as eksctl writes it sets the plugin's AWS_STS_REGIONAL_ENDPOINTS
    (regional) and AWS_DEFAULT_REGION, and often AWS_PROFILE: settings, not credentials (AWS SDKs and
    Tools Reference Guide). Taken as secrets by value, every later line lost its region ("scaled gpu-a in
    <redacted>", an ARN, an AZ), for the life of the container. A credential beside them still goes."""
    monkeypatch.setattr(observability, "_known", frozenset())  # values added here stay here
    monkeypatch.setattr(observability, "_known_pattern", None)
    secret_key = secrets.token_urlsafe(30)
    settings = {"AWS_STS_REGIONAL_ENDPOINTS": "regional", "AWS_DEFAULT_REGION": "ap-southeast-2",
                "AWS_PROFILE": "production", "AWS_SECRET_ACCESS_KEY": secret_key}  # fmt: skip
    KubeClient.from_kubeconfig(_failing_exec_kubeconfig(server, settings, "AWS_SECRET_ACCESS_KEY")).close()

    line = "raised gpu-a in ap-southeast-2 (ap-southeast-2a), regional STS, profile production"
    assert observability.redact(line) == line
    out, err = capfd.readouterr()
    for where in (debug_log.getvalue(), out, err):
        assert secret_key not in where


def _logs_of_echoing_plugin(
    server: KubeApiServer, debug_log: io.StringIO, capfd: pytest.CaptureFixture[str], command: list[str]
) -> tuple[str, str, str]:
    """What is logged, and written to stdout and stderr, when a kubeconfig's exec plugin runs ``command``
    (its first word named as the shell's ``$0``) and fails, echoing it to its stderr."""
    kubeconfig = _failing_exec_kubeconfig(server, {}, "")
    kubeconfig["users"][0]["user"]["exec"]["args"] = [  # type: ignore[index]
        "-c", f'echo "{command[0]} $* refused" >&2; exit 1', *command,
    ]  # fmt: skip
    KubeClient.from_kubeconfig(kubeconfig).close()
    out, err = capfd.readouterr()
    return debug_log.getvalue(), out, err


def test_an_exec_plugin_that_fails_quoting_a_secret_of_its_arguments_leaves_it_in_no_log(
    server: KubeApiServer,
    debug_log: io.StringIO,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Azure's kubelogin takes a service principal's secret as ``--client-secret <secret>``,
    int128/kubelogin as ``--oidc-client-secret=<secret>``: a plugin that fails and echoes its command line
    puts the secret in the line the kubernetes client logs. Its other arguments (a region, a cluster's
    name) are no secret and stay readable in every line."""
    monkeypatch.setattr(observability, "_known", frozenset())  # values added here stay here
    monkeypatch.setattr(observability, "_known_pattern", None)
    secret, oidc_secret = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    logged, out, err = _logs_of_echoing_plugin(server, debug_log, capfd, [
        "kubelogin", "get-token", "--client-secret", secret,
        f"--oidc-client-secret={oidc_secret}", "--region", "ap-southeast-2", "--cluster-name", "ml-training",
    ])  # fmt: skip

    assert "exec: process returned 1" in logged and "--client-secret" in logged
    for where in (logged, out, err):
        assert secret not in where and oidc_secret not in where
    line = "raised gpu-a of ml-training in ap-southeast-2"
    assert observability.redact(line) == line


def test_an_exec_plugin_that_fails_quoting_a_short_secret_or_a_short_flags_leaves_neither_in_a_log(
    server: KubeApiServer,
    debug_log: io.StringIO,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """doctl takes its API token as ``-t <token>`` (its ``--access-token``), and a password may be short
    (``--password`` of 6 characters, under the length a value is blanked inside other words at): a
    plugin that fails and echoes its command line leaves neither in a line. A short secret stays in a
    longer word, a region or an ARN that holds its letters; Azure kubelogin's ``-t``, a tenant's id, stays."""
    monkeypatch.setattr(observability, "_known", frozenset())  # values added here stay here
    monkeypatch.setattr(observability, "_known_pattern", None)
    monkeypatch.setattr(observability, "_words", frozenset(), raising=False)
    monkeypatch.setattr(observability, "_words_pattern", None, raising=False)
    token, password = "dop_v1_" + secrets.token_hex(32), "w" + secrets.token_hex(2) + "q"
    logged, out, err = _logs_of_echoing_plugin(server, debug_log, capfd, [
        "doctl", "kubernetes", "cluster", "kubeconfig", "exec-credential", "-t", token, "--password", password,
        "--region", "ap-southeast-2",
    ])  # fmt: skip

    assert "exec: process returned 1" in logged and "exec-credential -t <redacted>" in logged
    for where in (logged, out, err):
        assert token not in where and f" {password} " not in where
    line = f"raised gpu-a in ap-southeast-2 ({password}x, arn:aws:iam::1:role/{password}), tenant -t 72f988bf"
    assert observability.redact(line) == line


def test_an_exception_logged_through_the_powertools_logger_carries_no_credential() -> None:
    """Powertools' formatter writes a record's exception from its ``exc_info`` itself (``exception``: the
    traceback, ``stack_trace``: the exception's value and frames), not from the ``exc_text`` the filter
    redacted, so a module of ours logging an error with ``exc_info`` (``spillway.*`` loggers propagate
    to the Powertools logger) would print what the exception quotes: an ApiException's headers, say."""
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    handler = observability.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    stdout = handler.setStream(buffer)  # the Lambda's own handler, its filter and formatter, into a buffer
    try:
        raise RuntimeError(f"HTTP response headers: {{'Authorization': 'Bearer {secret}'}}")
    except RuntimeError:
        observability.logger.exception("read failed")
        logging.getLogger("spillway.adapters.test").warning("read failed again", exc_info=True)
    finally:
        handler.setStream(stdout)
    out = buffer.getvalue()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["message"] for line in lines] == ["read failed", "read failed again"]
    for line in lines:
        assert "'Bearer <redacted>'" in line["exception"]
        assert "RuntimeError" in line["exception"]  # the traceback stays
        assert line["stack_trace"]["value"].endswith("'Bearer <redacted>'}")
    assert secret not in out


def test_a_powertools_line_whose_message_holds_a_secrets_manager_value_stays_json() -> None:
    """A Secrets Manager value is blanked to the end of its text, which, redacting a written line, would
    take the line's closing fields and brace too: each field is redacted, and the line is still JSON."""
    handler = observability.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    stdout = handler.setStream(buffer)
    try:
        observability.logger.info('Response body: {"SecretString": "token: abc"}', extra={"after": "kept"})
    finally:
        handler.setStream(stdout)
    line = json.loads(buffer.getvalue())
    assert line["message"] == 'Response body: {"SecretString": <redacted>'
    assert line["after"] == "kept"


def test_an_exception_a_handler_formats_from_exc_info_itself_carries_no_credential() -> None:
    """The Lambda runtime's JSON log format (awslambdaric's JsonFormatter, on the root logger) writes a
    record's ``errorType`` as ``exc_info[0].__name__``, ``errorMessage`` as ``str(exc_info[1])`` and the
    frames from ``exc_info[2]``, not the ``exc_text`` the filter cleaned: the exception a record carries
    is one whose text is redacted, of the same name, and with the same traceback."""
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    written: list[tuple[str, str, str, str]] = []

    class RuntimeJson(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            assert record.exc_info is not None and record.exc_info[0] is not None
            kind, value, tb = record.exc_info
            frames = "".join(traceback.format_tb(tb))
            text = "".join(traceback.format_exception(kind, value, tb))
            written.append((kind.__name__, str(value), frames, text))

    class Refused(Exception):
        pass

    handler = RuntimeJson()
    library = logging.getLogger("some.library.client")
    library.addHandler(handler)
    try:
        try:
            raise Refused(f"Authorization: Bearer {secret}")
        except Refused:
            library.error("call failed", exc_info=True)
    finally:
        library.removeHandler(handler)
    [(name, message, frames, text)] = written
    assert (name, message) == ("Refused", "Authorization: Bearer <redacted>")
    assert "in test_an_exception_a_handler_formats_from_exc_info_itself_carries_no_credential" in frames
    assert text.rstrip().endswith("Refused: Authorization: Bearer <redacted>")
    assert secret not in text


def _powertools_lines(log: Callable[[], None]) -> tuple[str, list[dict[str, Any]]]:
    """What ``log()`` writes through the Lambda's own Powertools handler (its filter and formatter)."""
    handler = observability.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    stdout = handler.setStream(buffer)
    try:
        log()
    finally:
        handler.setStream(stdout)
    out = buffer.getvalue()
    return out, [json.loads(line) for line in out.splitlines()]


def test_a_logged_exception_keeps_its_causes_and_notes_redacted_not_dropped() -> None:
    """The exception a record carries in place of one quoting a secret is that exception as a traceback
    prints it, redacted: its cause (``raise ... from``), its context, its notes (Powertools'
    ``exception_notes``) and a group's sub-exceptions stay, each blanked where it quotes a secret."""
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    cause_text, note, sub = "(401) Reason: " + "Unauthorized", "retried " + "twice", "sub" + "-exception one"

    def log() -> None:
        try:
            try:
                raise ValueError(f"{cause_text}: Authorization: Bearer {secret}")
            except ValueError as exc:
                error = RuntimeError(f"list nodes failed: Bearer {secret}")
                error.add_note(f"{note}, token: {secret}")
                raise error from exc
        except RuntimeError:
            observability.logger.exception("read failed")
        try:
            raise ExceptionGroup(f"token: {secret}", [KeyError(sub)])
        except ExceptionGroup:
            observability.logger.exception("group failed")

    out, (chained, group) = _powertools_lines(log)
    assert secret not in out
    assert chained["exception_name"] == "RuntimeError"
    assert f"ValueError: {cause_text}: Authorization: Bearer <redacted>" in chained["exception"]
    assert "direct cause of the following exception" in chained["exception"]
    assert chained["exception"].rstrip().endswith(f"{note}, token: <redacted>")
    assert chained["exception_notes"] == [f"{note}, token: <redacted>"]
    assert group["exception_name"] == "ExceptionGroup" and sub in group["exception"]


def test_an_exception_whose_cause_quotes_a_secret_reaches_no_formatter_that_writes_the_chain() -> None:
    """A formatter that writes a record's exception with its causes from ``exc_info`` itself (as
    Powertools' ``formatException`` does) gets no secret a cause quotes, though the exception's own text
    holds none."""
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    written: list[str] = []

    class Chain(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            assert record.exc_info is not None and record.exc_info[1] is not None
            written.append("".join(traceback.format_exception(record.exc_info[1])))

    handler = Chain()
    library = logging.getLogger("some.library.chain")
    library.addHandler(handler)
    try:
        try:
            try:
                raise ValueError(f"Authorization: Bearer {secret}")
            except ValueError as exc:
                raise RuntimeError("list nodes failed") from exc
        except RuntimeError as error:
            library.error("call failed", exc_info=True)
            assert secret in str(error.__cause__)  # the exception raised on is left as it was
    finally:
        library.removeHandler(handler)
    [text] = written
    assert "ValueError: Authorization: Bearer <redacted>" in text and secret not in text
    assert text.rstrip().endswith("RuntimeError: list nodes failed")


def test_a_key_appended_to_the_powertools_logger_is_redacted_in_every_line() -> None:
    """Keys appended to the logger (``append_keys``) are the formatter's, no record's field the filter
    sees: the formatter redacts each field it writes."""
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    observability.logger.append_keys(caller=f"Bearer {secret}")
    try:
        out, [line] = _powertools_lines(lambda: observability.logger.info("observed"))
    finally:
        observability.logger.remove_keys(["caller"])
    assert line["caller"] == "Bearer <redacted>" and secret not in out
