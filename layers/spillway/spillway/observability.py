"""Logging, tracing and metrics, made once per container (service ``spillway``, namespace ``Spillway``).

Handlers import ``logger``, ``tracer`` and ``metrics`` from here at module level and put the decorators
on the handler::

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics(capture_cold_start_metric=True)
    def handler(event, context): ...

Metrics go out as CloudWatch Embedded Metric Format lines on stdout when the handler returns (no API
calls). X-Ray tracing needs ``aws-xray-sdk``; where it is not installed (tests, the local stack) the
tracer is a stand-in whose decorators do nothing, so handlers are the same everywhere.

Credentials never reach a log: importing this module installs :class:`RedactSecrets` on every record
of every logger (at creation, through the log record factory, so botocore, urllib3 and the kubernetes
client at DEBUG are covered, and handlers added later too) and again on the root and Powertools
handlers (for ``extra`` fields, which are set after creation), and each field of Powertools' JSON lines
once more as written (:class:`RedactingFormatter`: it formats a record's exception itself); a record's
exception is one whose text is redacted, for any formatter that writes it itself. It blanks EKS bearer tokens
(``k8s-aws-v1.…``), ``Authorization`` header values, SigV4 signatures and session tokens (which would
let anyone rebuild the presigned URL a token encodes), and a kubeconfig's ``token``/``password``/
``client-key-data`` values, OAuth and OpenID Connect credentials (``client_secret``, ``access_token``,
``refresh_token``, ``id_token``, with ``_`` or ``-``, after ``:`` or ``=``), the whole value of a Secrets
Manager secret (``SecretString``, ``SecretBinary``: from the key to the end of the text), and, wherever
they appear, the values :func:`add_secret_values` was given (a kubeconfig's credentials), and, of any
length, where one stands as a word, those :func:`add_secret_words` was given (what an exec plugin's
arguments give to a secret's flag); AWS secret keys and session tokens; and a field's whole value under a
key named like a credential (:data:`SECRET_KEYS`).

What leaves a function other than through logging goes through the same redaction: :func:`redacting`,
on every handler, redacts the error a handler lets escape (the Lambda runtime writes it itself: the
function's error, a Step Functions Cause) under its own class, and each text of its answer (a one-word
text, a name, keeps a short secret word and a known value shaped like a name: :func:`redacted_answer`).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit, single_metric

SERVICE = "spillway"
NAMESPACE = "Spillway"

F = TypeVar("F", bound=Callable[..., Any])


class TracerLike(Protocol):
    """The part of Powertools' ``Tracer`` Spillway uses (typed, so decorated handlers stay typed)."""

    def capture_lambda_handler(self, lambda_handler: F) -> F: ...

    def capture_method(self, method: F) -> F: ...

    def put_annotation(self, key: str, value: Any) -> None: ...


class _NoTracer:
    """A tracer whose decorators do nothing (no X-Ray SDK installed)."""

    disabled = True

    def capture_lambda_handler(self, lambda_handler: F) -> F:
        return lambda_handler

    def capture_method(self, method: F) -> F:
        return method

    def put_annotation(self, key: str, value: Any) -> None:
        return None


def _make_tracer() -> TracerLike:
    if importlib.util.find_spec("aws_xray_sdk") is None:
        return _NoTracer()
    from aws_lambda_powertools import Tracer

    return cast(TracerLike, Tracer(service=SERVICE))


REDACTED = "<redacted>"
# A value ends at whitespace, a quote, a comma, a closing bracket or an escaped character (\\n in JSON).
_VALUE = r"[^\s\"',;}\]\\)&]+"
_SECRETS = (
    # EKS IAM tokens (aws eks get-token, spillway.adapters.eks_auth): the base64url presigned URL.
    re.compile(r"(k8s-aws-v1\.)[A-Za-z0-9_\-=]+"),
    # Authorization header values: Bearer/Basic tokens, and SigV4's "Credential=..., Signature=...".
    re.compile(
        r"(?i)(authorization['\"]?\s*[:=]\s*(?:b(?=['\"]))?['\"]?(?:(?:bearer|basic|aws4-hmac-sha256)\s+)?)"
        r"[^'\"\r\n\\]+"
    ),
    re.compile(r"(?i)(\bbearer\s+)" + _VALUE),
    # SigV4 signatures (botocore logs "Signature:\n<hex>" at DEBUG) and presigned query parameters.
    re.compile(r"(?i)(\bsignature[=:]\s*)[0-9a-f]{16,}"),
    re.compile(
        r"(?i)(x-amz-(?:signature|security-token|credential)['\"]?\s*[:=]\s*(?:b(?=['\"]))?['\"]?)" + _VALUE
    ),
    # A Secrets Manager value (botocore logs GetSecretValue's response body at DEBUG), whatever it holds
    # (a kubeconfig's OIDC client-secret, an exec plugin's env...): blanked whole, to the end of the text.
    re.compile(r"(?is)(\bsecret(?:string|binary)\b\\*['\"]?\s*[:=]\s*).+"),
    # Kubeconfig credentials, as YAML ("token: x") or JSON ("token": "x"), also escaped in a JSON body.
    re.compile(
        r"(?i)((?<![a-z_-])(?:token|password|client-key-data|id-token|refresh-token)\\*['\"]?\s*:\s*\\*['\"]?)"
        + _VALUE
    ),
    # OAuth 2.0 and OpenID Connect credentials (RFC 6749's client_secret, access_token, refresh_token;
    # OIDC's id_token), as a kubeconfig's auth-provider names them (client-secret, ...) and as an OIDC
    # refresh sends and answers them (requests-oauthlib logs at DEBUG the form body
    # "...&client_secret=x&refresh_token=y", the keyword dict and the JSON answer).
    re.compile(
        r"(?i)((?<![a-z0-9])(?:client[-_]secret|(?:access|refresh|id)[-_]token)\\*['\"]?\s*[:=]\s*\\*['\"]?)"
        + _VALUE
    ),
    # AWS credentials: a credentials file's or the environment's aws_secret_access_key/aws_session_token
    # (any case), and STS's Credentials as botocore answers them (SecretAccessKey, SessionToken).
    re.compile(
        r"(?i)((?<![a-z0-9])(?:aws[-_]?)?(?:secret[-_]?access[-_]?key|session[-_]?token)"
        r"\\*['\"]?\s*[:=]\s*\\*['\"]?)" + _VALUE
    ),
)
# Secrets known by value (a kubeconfig's credentials, :func:`add_secret_values`): blanked wherever they
# appear, with or without a key (requests-oauthlib logs its auth tuple, ('<client id>', '<secret>')).
_known: frozenset[str] = frozenset()
_known_pattern: re.Pattern[str] | None = None
# ... those of them no name is shaped like (:func:`_name_shaped`): blanked in an answer's one-word text too
_opaque_pattern: re.Pattern[str] | None = None
_known_lock = threading.Lock()
# A shorter value is too likely to be a common word to blank everywhere (and too weak to be a secret).
MIN_KNOWN_SECRET = 8
# A known value shaped like a name a function's answer carries (a cluster's, a group's, a region's, an
# account's id), which an exec plugin's env value taken whole may be (CLUSTER_NAME=ml-production): parts
# of letters and digits joined by "-", "_" or ".", each of at most three runs of letters or of digits
# ("p4d", "24xlarge", "us-east-1"), no run of letters going from lower to upper case ("MLProd" may,
# "xKq" not). A credential's random letters and digits (a token, base64, hex) alternate far more often,
# or hold "+", "/", "=": no name coincides with one.
_LETTERS = r"(?:[A-Z]+[a-z]*|[a-z]+)"
_NAME_PART = rf"(?:{_LETTERS}(?:[0-9]+{_LETTERS}?)?|[0-9]+(?:{_LETTERS}[0-9]*)?)"
_NAME_SHAPED = re.compile(rf"{_NAME_PART}(?:[-_.]{_NAME_PART})*")
# ... but a UUID is no name a known value coincides with, though one in 70 or so is shaped like one: a
# credential often is one (a service principal's password as `az ad sp create-for-rbac` gave it, a Heroku
# API key), and an answer's UUID (an execution's name, an object's uid) is none an exec env holds
_UUID = re.compile(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")


def _name_shaped(value: str) -> bool:
    """Whether a known ``value`` is shaped like a name (:data:`_NAME_SHAPED`, not a :data:`_UUID`)."""
    return _NAME_SHAPED.fullmatch(value) is not None and _UUID.fullmatch(value) is None


def _any_of(values: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching each of ``values``, the longest first (so a longer one is blanked whole)."""
    longest_first = sorted(values, key=len, reverse=True)
    return re.compile("|".join(re.escape(v) for v in longest_first)) if longest_first else None


def add_secret_values(values: Iterable[str]) -> None:
    """Blank these values in every record from now on, wherever they appear (in an answer's one-word
    text only those no name is shaped like: :func:`redacted_answer`)."""
    global _known, _known_pattern, _opaque_pattern
    with _known_lock:
        new = {v for v in values if len(v) >= MIN_KNOWN_SECRET} - _known
        if not new:
            return
        _known = _known | new
        _known_pattern = _any_of(_known)
        _opaque_pattern = _any_of(v for v in _known if not _name_shaped(v))


# Secrets a flag named (an exec plugin's ``--password <value>``, :func:`add_secret_words`), of any length:
# blanked where one stands as a word of its own, not inside another (a region, an ARN, a longer word), so
# a short one does not blank every line that happens to hold its letters.
_words: frozenset[str] = frozenset()
_words_pattern: re.Pattern[str] | None = None
# what may touch a word on either side and still leave it a word of its own: not a letter, digit or any
# of the characters a name, a region, an ARN, a path or a URL joins its parts with; but after it such a
# character that no more of a name follows (a sentence's full stop, a clause's colon: "token pw1: bad"),
# and before it a line break or tab a repr or JSON escapes ("...\\npw1")
_JOINED = r"\w./:@\-"
_WORD_BEFORE = rf"(?:(?<=\\[nrt])|(?<![{_JOINED}]))"
_WORD_AFTER = rf"(?!\w|[{_JOINED}]\w)"


def add_secret_words(values: Iterable[str]) -> None:
    """Blank these values from now on, whatever their length, where each stands as a word of its own
    (one of :data:`MIN_KNOWN_SECRET` or more characters is blanked everywhere too: :func:`add_secret_values`)."""
    global _words, _words_pattern
    values = [v for v in values if v.strip()]
    add_secret_values(values)
    with _known_lock:
        new = set(values) - _words
        if not new:
            return
        _words = _words | new
        longest_first = "|".join(re.escape(v) for v in sorted(_words, key=len, reverse=True))
        _words_pattern = re.compile(f"{_WORD_BEFORE}(?:{longest_first}){_WORD_AFTER}")


def redact(text: str, *, words: bool = True, names: bool = True) -> str:
    """``text`` with every secret :func:`add_secret_values` (unless not ``names``, only those no name is
    shaped like: :func:`_name_shaped`) and (unless not ``words``) :func:`add_secret_words` named and every
    credential :data:`_SECRETS` knows replaced by ``<redacted>``."""
    known = _known_pattern if names else _opaque_pattern
    named = _words_pattern if words else None
    if known is not None:
        text = known.sub(REDACTED, text)
    if named is not None:
        text = named.sub(REDACTED, text)
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


# The keys whose value is a credential whatever it holds (a log field's, at any depth), compared in lower
# case without "-" and "_": HTTP's Authorization and cookies, a kubeconfig user's token, password and
# client-key-data, OAuth's and OIDC's, AWS's secret key and session token (as a credentials file, the
# environment and STS's Credentials name them), Secrets Manager's value. Exact names, not endings: a
# lifecycle action's LifecycleActionToken or a paginator's NextToken is no credential.
SECRET_KEYS = frozenset(
    {
        "authorization", "proxyauthorization", "cookie", "setcookie",
        "token", "bearertoken", "idtoken", "accesstoken", "refreshtoken",
        "password", "passwd", "passphrase", "secret", "clientsecret", "clientkey", "clientkeydata",
        "privatekey", "apikey", "secretaccesskey", "awssecretaccesskey", "sessiontoken", "awssessiontoken",
        "securitytoken", "xamzsecuritytoken", "secretstring", "secretbinary",
    }
)  # fmt: skip


def secret_key(key: object) -> bool:
    """Whether a mapping's ``key`` names a credential (:data:`SECRET_KEYS`)."""
    return isinstance(key, str) and key.lower().replace("-", "").replace("_", "") in SECRET_KEYS


def _redact_value(value: Any) -> Any:
    """A log field's value redacted: its text, and in a mapping at any depth the whole value of a key
    named like a credential (:func:`secret_key`; a null stays one)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bytes):
        return redact(value.decode("utf-8", "replace"))
    if isinstance(value, dict):
        return {
            k: REDACTED if secret_key(k) and v is not None else _redact_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return _same_sequence(value, [_redact_value(v) for v in value])
    return value


def _same_sequence(value: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    """``items`` as a sequence of ``value``'s type: a named tuple takes its fields one by one
    (``_make``), a list or a tuple one iterable; a subclass that cannot be made so, a plain one."""
    kind = type(value)
    try:
        return kind._make(items) if hasattr(kind, "_make") else kind(items)
    except Exception:
        return tuple(items) if isinstance(value, tuple) else items


ExcInfo = tuple[type[BaseException], BaseException, Any]
# What a traceback prints for an exception whose str() raises (traceback's _safe_string).
_UNPRINTABLE = "<exception str() failed>"


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # an exception that cannot say itself
        return _UNPRINTABLE


def _notes(exc: BaseException) -> list[str]:
    notes = getattr(exc, "__notes__", None)
    return [_text(note) for note in notes] if isinstance(notes, list | tuple) else []


def _chain(value: BaseException) -> Iterator[BaseException]:
    """``value`` and every exception a traceback of it may print: its causes, contexts and, for a group,
    its sub-exceptions (each once, as a cycle may link them)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [value]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        todo += [exc.__cause__, exc.__context__]
        if isinstance(exc, BaseExceptionGroup):
            todo += exc.exceptions


def _quotes_a_secret(exc: BaseException) -> bool:
    return any(redact(text) != text for text in (_text(exc), *_notes(exc)))


def _standin(exc: BaseException, made: dict[int, BaseException]) -> BaseException:
    """An exception of ``exc``'s name and module whose text and notes are redacted, on its traceback, with
    its cause, context and sub-exceptions stood in for likewise; ``exc`` is left as it is."""
    if id(exc) in made:
        return made[id(exc)]
    kind, cleaned = type(exc), redact(_text(exc))
    names = {"__module__": kind.__module__, "__qualname__": kind.__qualname__, "__str__": lambda _: cleaned}
    if isinstance(exc, BaseExceptionGroup):
        made[id(exc)] = type(kind.__name__, (Exception,), names)(cleaned)  # a cycle back to it ends here
        subs = [_standin(sub, made) for sub in exc.exceptions]
        standin: BaseException = type(kind.__name__, (BaseExceptionGroup,), names)(cleaned, subs)
    else:
        standin = type(kind.__name__, (Exception,), names)(cleaned)
    made[id(exc)] = standin
    standin.__traceback__ = exc.__traceback__
    standin.__cause__ = None if exc.__cause__ is None else _standin(exc.__cause__, made)
    standin.__context__ = None if exc.__context__ is None else _standin(exc.__context__, made)
    standin.__suppress_context__ = exc.__suppress_context__
    if notes := _notes(exc):
        standin.__notes__ = [redact(note) for note in notes]
    return standin


def _redacted_exc_info(exc_info: ExcInfo) -> ExcInfo:
    """``exc_info`` with, when its exception or one a traceback of it prints (a cause, a context, a
    group's sub-exception) quotes a secret in its text or notes, a stand-in for it as a traceback prints
    it, redacted (:func:`_standin`): for a formatter that writes the exception itself (the Lambda
    runtime's JSON log format: ``str(exc_info[1])``; Powertools' and others' ``formatException``, with
    its causes), not the ``exc_text`` redacted. The exception raised is left as it is."""
    kind, value, tb = exc_info
    if not any(_quotes_a_secret(exc) for exc in _chain(value)):
        return exc_info
    return kind, _standin(value, {}).with_traceback(tb), tb


def _same_kind(exc: BaseException, cleaned: str) -> BaseException:
    """``exc`` saying ``cleaned``: an instance of a subclass of its class under the same name, module and
    attributes (redacted), made without running its ``__init__`` again, so that whoever catches its class
    catches it still and the Lambda runtime's ``errorType`` (the class's ``__name__``) is the same."""
    kind = type(exc)
    names = {"__module__": kind.__module__, "__qualname__": kind.__qualname__, "__str__": lambda _: cleaned}
    same: BaseException = kind.__new__(type(kind.__name__, (kind,), names))
    same.args = (cleaned,)
    same.__dict__.update(_redact_value(dict(vars(exc))))
    return same


def redacted_error(exc: BaseException) -> BaseException:
    """``exc`` itself when neither it nor an exception a traceback of it prints (:func:`_chain`) quotes a
    secret; else ``exc`` as :func:`_same_kind` makes it, its text redacted, on its traceback, its cause
    and context stood in for redacted (:func:`_standin`). An exception group (which needs its members
    to be made) and any class that cannot be made so is stood in for by :func:`_standin` whole: the same
    name, no longer its class."""
    if not any(_quotes_a_secret(each) for each in _chain(exc)):
        return exc
    try:
        same = _same_kind(exc, redact(_text(exc)))
    except Exception:  # a class whose __new__ wants its arguments
        return _standin(exc, {}).with_traceback(exc.__traceback__)
    made = {id(exc): same}
    same.__cause__ = None if exc.__cause__ is None else _standin(exc.__cause__, made)
    same.__context__ = None if exc.__context__ is None else _standin(exc.__context__, made)
    same.__suppress_context__ = exc.__suppress_context__
    return same.with_traceback(exc.__traceback__)


def redacted_answer(value: Any) -> Any:
    """A function's answer, each text in it redacted. A text that is one word is a name (a cluster's, a
    group's, a region's, an owner's id) the state machine goes on with, never a credential (no answer
    carries one as a field): it loses no short secret :func:`add_secret_words` has which it happens to
    be, nor a known value shaped like a name (an exec plugin's env value taken whole, CLUSTER_NAME=
    ml-production, in the cluster's name or a group's named after it: :func:`_name_shaped`). A known
    value no name is shaped like, and a credential a pattern finds, are blanked in it still."""
    if isinstance(value, str):
        sentence = any(c.isspace() for c in value)
        return redact(value, words=sentence, names=sentence)
    if isinstance(value, dict):
        return {k: redacted_answer(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return _same_sequence(value, [redacted_answer(v) for v in value])
    return value


def redacting(handler: F) -> F:
    """A Lambda handler whose error and answer leave the function redacted, as a log line is. The Lambda
    runtime writes an error a handler lets escape itself, not through logging (its error response and
    log line: ``errorMessage`` is ``str(value)``, ``errorType`` the class's name, which Step Functions
    makes a task's ``Error`` and ``Cause`` and the execution's ``ExecutionFailed``); the answer is a
    state's output in the execution's history. The innermost decorator, so the tracer records the
    redacted error too."""

    @functools.wraps(handler)
    def redacted(*args: Any, **kwargs: Any) -> Any:
        try:
            answer = handler(*args, **kwargs)
        except Exception as exc:
            cleaned = redacted_error(exc)
            if cleaned is exc:
                raise
            escaped = cleaned
        else:
            return redacted_answer(answer)
        raise escaped  # out of the except: the error quoting the secret is not made its context

    return cast(F, redacted)


_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class RedactSecrets(logging.Filter):
    """Rewrites a record so that no credential survives: its message (formatted once, with its args),
    its exception text, and every ``extra`` field. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what there is, still redacted
            message = f"{record.msg} {record.args}"
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_info = _redacted_exc_info(cast(ExcInfo, record.exc_info))
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD:
                record.__dict__[key] = _redact_value({key: value})[key]
        return True


_REDACTOR = RedactSecrets()


def install_redaction(*loggers: logging.Logger) -> None:
    """Redact every record from now on (idempotent): at creation, and on the handlers of the root
    logger and of ``loggers`` (extras are added after creation)."""
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "redacts", False):

        def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = factory(*args, **kwargs)
            _REDACTOR.filter(record)
            return record

        redacting_factory.redacts = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(redacting_factory)
    for each in (logging.getLogger(), *loggers):
        for handler in each.handlers:
            if _REDACTOR not in handler.filters:
                handler.addFilter(_REDACTOR)


def _redacted_fields(value: Any) -> Any:
    """A log line's fields, each value redacted as the text it is written as (an object as its ``str``, as
    Powertools' JSON encoder writes one); numbers, booleans and nulls as they are."""
    if isinstance(value, dict):
        return {
            k: REDACTED if secret_key(k) and v is not None else _redacted_fields(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redacted_fields(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(value if isinstance(value, str) else str(value))


class RedactingFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON lines with every field redacted before it is written: its formatter writes a
    record's exception from the record's ``exc_info`` itself (``exception``; ``stack_trace``, the
    exception's value), not from the ``exc_text`` :class:`RedactSecrets` cleaned, and the keys appended
    to the logger are no record's fields. Field by field, not the line's text, so the line stays JSON (a
    Secrets Manager value is blanked to the end of its text: of the field, not of the line)."""

    def serialize(self, log: Any) -> str:
        return super().serialize(_redacted_fields(log))


logger = Logger(service=SERVICE, logger_formatter=RedactingFormatter())
tracer = _make_tracer()
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
install_redaction(logger._logger)


def add_count(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def add_seconds(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=round(value, 3))


def add_bytes(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Bytes, value=value)


@contextmanager
def counting_answers(function: str, answers: frozenset[str]) -> Iterator[None]:
    """Count, as ``AnsweredErrors`` (dimension ``Function``), an error the body raises whose class name is
    one of ``answers`` (:data:`spillway.errors.STEP_ANSWERS`: what the state machine retries or catches by
    that name, as Step Functions matches a Lambda's errorType), and raise it on. Flushed at once, since
    the invocation fails, and stamped with the invocation's start: the timestamp of Lambda's Errors
    is when the function was invoked, not when the error occurred (AWS Lambda Developer Guide, "Types
    of metrics for Lambda functions"), so both fall in the same period of the errors alarm."""
    started = datetime.now(UTC)
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ in answers:
            with single_metric(
                name="AnsweredErrors",
                unit=MetricUnit.Count,
                value=1,
                namespace=NAMESPACE,
                default_dimensions={"service": SERVICE, **metrics.default_dimensions},
            ) as metric:
                metric.add_dimension(name="Function", value=function)
                metric.set_timestamp(started)
        raise


def set_cluster(cluster: str) -> None:
    """Every metric of this container carries the ``Cluster`` dimension."""
    metrics.set_default_dimensions(Cluster=cluster)


def add_cluster_writes(outcome: Mapping[str, Any]) -> None:
    """What a plan wrote to the Kubernetes API after its commit: pod Events (``PodEventsPosted``;
    ``PodEventsFailed``: refused, or not sent for lack of time or of an API) and scale-down candidate
    taints (``CandidateTaintsWritten``, ``CandidateTaintsFailed``), ProvisioningRequests that ended a
    week ago deleted (``ProvisioningRequestsDeleted``, ``ProvisioningRequestDeletesFailed``); a warning
    gives the errors."""
    events = outcome.get("events") or {}
    add_count("PodEventsPosted", events.get("posted", 0))
    add_count("PodEventsFailed", events.get("failed", 0) + events.get("skipped", 0))
    if events.get("errors"):
        logger.warning("pod events not posted", extra={"events": events})
    marked = outcome.get("soft_taints") or {}
    add_count("CandidateTaintsWritten", marked.get("written", 0))
    add_count("CandidateTaintsFailed", marked.get("failed", 0))
    if marked.get("errors"):
        logger.warning("scale-down candidate taints not written", extra={"soft_taints": marked})
    deleted = outcome.get("provisioning_deleted") or {}
    add_count("ProvisioningRequestsDeleted", deleted.get("written", 0))
    add_count("ProvisioningRequestDeletesFailed", deleted.get("failed", 0))
    if deleted.get("errors"):
        logger.warning("ended ProvisioningRequests not deleted", extra={"provisioning_deleted": deleted})


TENANT_METRICS = (
    ("nodes", "TenantScaleUpNodes"),
    ("gpus", "TenantScaleUpGPUs"),
    ("cpu", "TenantScaleUpCPU"),
    ("uncordoned", "TenantUncordonedNodes"),
)


def add_tenant_metrics(tenants: Mapping[str, Mapping[str, Any]] | None) -> None:
    """Per tenant of a plan, with a ``Tenant`` dimension (beside this container's defaults): capacity
    added (``TenantScaleUpNodes``, ``TenantScaleUpGPUs``, ``TenantScaleUpCPU`` cores: new nodes only),
    nodes Spillway cordoned and uncordons for its pods (``TenantUncordonedNodes``) and pods held by
    limits (``TenantPodsHeld``; again with a ``Limit`` dimension per limit code). One EMF line per
    tenant (and per tenant and limit), written at once; only the tenants the plan names. And
    ``PodsHeldByLimits``, all tenants together, among this invocation's metrics (0 too: its alarm needs
    a value every plan)."""
    tenants = tenants or {}
    add_count("PodsHeldByLimits", sum(sum((t.get("held") or {}).values()) for t in tenants.values()))
    defaults = dict(metrics.default_dimensions)
    for tenant, numbers in sorted(tenants.items()):
        held: Mapping[str, int] = numbers.get("held") or {}
        line = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE, default_dimensions=defaults)
        line.add_dimension(name="Tenant", value=tenant)
        for key, name in TENANT_METRICS:
            line.add_metric(name=name, unit=MetricUnit.Count, value=numbers.get(key, 0))
        line.add_metric(name="TenantPodsHeld", unit=MetricUnit.Count, value=sum(held.values()))
        line.flush_metrics()
        for code, count in sorted(held.items()):
            by_limit = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE, default_dimensions=defaults)
            by_limit.add_dimension(name="Tenant", value=tenant)
            by_limit.add_dimension(name="Limit", value=code)
            by_limit.add_metric(name="TenantPodsHeld", unit=MetricUnit.Count, value=count)
            by_limit.flush_metrics()
