"""``Status`` objects, shaped as the real API server writes them, and the error that carries one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

JsonObj = dict[str, Any]

#: ``reason`` the API server puts in a Status for an HTTP code (``metav1.StatusReason``).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_object(
    code: int, *, status: str = "Failure", reason: str = "", message: str = "", details: JsonObj | None = None
) -> JsonObj:
    """A ``v1 Status`` with its keys in the order the API server writes them."""
    out: JsonObj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status}
    if message:
        out["message"] = message
    if reason:
        out["reason"] = reason
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


class KubeApiError(Exception):
    """An API error: an HTTP code and the Status body the real server would send with it.

    Raised by the HTTP layer and by the in-process helpers of :class:`KubeApiServer` alike.
    """

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: JsonObj | None = None,
        retry_after: int | None = None,
        empty_details: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.details = dict(details or {})
        self.retry_after = retry_after
        if retry_after is not None:
            self.details.setdefault("retryAfterSeconds", retry_after)
        #: headers sent beside the Status (a deprecated version's ``Warning``)
        self.extra_headers: dict[str, str] = {}
        #: ``"details": {}`` written when there are none (a Go StatusDetails set but left empty)
        self.empty_details = empty_details

    def status(self) -> JsonObj:
        details = self.details or ({} if self.empty_details else None)
        return status_object(self.code, reason=self.reason, message=self.message, details=details)

    def headers(self) -> dict[str, str]:
        retry = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        return {**retry, **self.extra_headers}


def _details(qualified: str, name: str) -> JsonObj:
    plural, _, group = qualified.partition(".")
    details: JsonObj = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def not_found(qualified: str, name: str) -> KubeApiError:
    """``pods "x" not found`` (``qualified`` is ``plural`` or ``plural.group``)."""
    return KubeApiError(404, f'{qualified} "{name}" not found', details=_details(qualified, name))


def already_exists(qualified: str, name: str) -> KubeApiError:
    return KubeApiError(
        409, f'{qualified} "{name}" already exists', reason="AlreadyExists", details=_details(qualified, name)
    )


def conflict(qualified: str, name: str, why: str) -> KubeApiError:
    return KubeApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        details=_details(qualified, name),
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


# ``field.ErrorType`` (k8s.io/apimachinery pkg/util/validation/field/errors.go): an error's body starts
# with its type's String(), its cause's reason is the type's value. TypeInvalid's body starts as
# Invalid's does ("Invalid value"): a :class:`FieldError` names it explicitly.
INVALID, REQUIRED, TYPE_INVALID = "FieldValueInvalid", "FieldValueRequired", "FieldValueTypeInvalid"
NOT_SUPPORTED, TOO_LONG, TOO_MANY = "FieldValueNotSupported", "FieldValueTooLong", "FieldValueTooMany"
_TYPE_OF_BODY = {
    "Required value": REQUIRED,
    "Unsupported value": NOT_SUPPORTED,
    "Duplicate value": "FieldValueDuplicate",
    "Too long": TOO_LONG,
    "Too many": TOO_MANY,
    "Forbidden": "FieldValueForbidden",
    "Not found": "FieldValueNotFound",
    "Internal error": "InternalError",
}


class FieldError(NamedTuple):
    """One ``field.Error``: the field's path, the error's body (``ErrorBody``: its type, the value, the
    detail) and its type; the type is read off the body unless given."""

    field: str
    message: str
    type: str = ""

    @property
    def reason(self) -> str:
        if self.type:
            return self.type
        return next((t for body, t in _TYPE_OF_BODY.items() if self.message.startswith(body)), INVALID)


def invalid_fields(qualified_kind: str, name: str, errors: Sequence[FieldError]) -> KubeApiError:
    """422 ``Invalid`` as ``errors.NewInvalid`` writes it (k8s.io/apimachinery pkg/api/errors): one
    cause per field error, in order; ``qualified_kind`` is ``Kind`` or ``Kind.group``; the message is
    the errors' aggregate (pkg/util/errors ``aggregate.Error``: the one error alone, else each distinct
    one once, in brackets)."""
    kind, _, group = qualified_kind.partition(".")
    shown = list(dict.fromkeys(f"{e.field}: {e.message}" for e in errors))
    aggregate = shown[0] if len(shown) == 1 else f"[{', '.join(shown)}]"
    details: JsonObj = {"name": name, **({"group": group} if group else {}), "kind": kind}
    details["causes"] = [{"reason": e.reason, "message": e.message, "field": e.field} for e in errors]
    return KubeApiError(422, f'{qualified_kind} "{name}" is invalid: {aggregate}', details=details)


def invalid(kind: str, name: str, field: str, message: str) -> KubeApiError:
    """422 ``Invalid`` with one field cause."""
    return invalid_fields(kind, name, [FieldError(field, message)])


def patch_not_applied() -> KubeApiError:
    """A JSON patch that does not apply to the object (a ``test`` that fails, a path that is missing):
    apiserver endpoints/handlers/patch.go answers ``NewGenericServerResponse(422, ...)`` with the
    library's error left out of the body (no cause: it is not an unexpected response), so every such
    failure reads the same."""
    return KubeApiError(
        422, "the server rejected our request due to an error in our request", empty_details=True
    )


def bad_request(message: str) -> KubeApiError:
    return KubeApiError(400, message)


def expired_continue() -> KubeApiError:
    return KubeApiError(
        410,
        "The provided continue parameter is too old to display a consistent list result. "
        "You can start a new list without the continue parameter.",
        reason="Expired",
    )


def forbidden(qualified: str, name: str, why: str, causes: list[JsonObj] | None = None) -> KubeApiError:
    """403 as ``errors.NewForbidden`` writes it: ``<resource> "<name>" is forbidden: <why>`` (``<resource>
    is forbidden: <why>`` for a request naming no object, a list), the details naming the resource (kind
    is its plural) and the object, and any causes an admission plugin adds."""
    details = _details(qualified, name)
    if not name:
        del details["name"]
    if causes:
        details["causes"] = causes
    subject = f'{qualified} "{name}"' if name else qualified
    return KubeApiError(403, f"{subject} is forbidden: {why}", details=details)


def fault(code: int, retry_after: int | None = None, message: str | None = None) -> KubeApiError:
    """The error an injected fault answers with (429 carries ``Retry-After: 1``, any other the
    ``retry_after`` given); ``message`` replaces its words."""
    if message is not None:
        return KubeApiError(code, message, retry_after=retry_after or (1 if code == 429 else None))
    if code == 429:
        return KubeApiError(429, "Too many requests, please try again later.", retry_after=retry_after or 1)
    if code == 500:
        return KubeApiError(500, "Internal error occurred: injected fault", retry_after=retry_after)
    if code == 503:
        return KubeApiError(
            503,
            "The server is currently unable to handle the request (injected fault)",
            retry_after=retry_after,
        )
    if code == 504:
        return KubeApiError(
            504,
            "The server was unable to return a response in the time allotted (injected fault)",
            retry_after=retry_after,
        )
    return KubeApiError(code, f"injected fault: HTTP {code}", retry_after=retry_after)
