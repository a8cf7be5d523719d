"""The one error path: code raises `ApiError`; this handler and `JsonErrorsMiddleware` render every failure
as the docs/api.md#errors flat body `{"success": false, "status": <int>, "message": "<text>"[, "field":
"<name>"]}`."""

import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from rest_framework import exceptions

from iam.platform import timeouts

logger = logging.getLogger(__name__)

AUTHENTICATION_REQUIRED = "Authentication required or invalid credentials."  # docs/api.md#errors
MALFORMED_JSON = "Malformed JSON syntax."  # docs/api.md#errors
INVALID_STRUCTURE = "Invalid JSON structure."  # docs/api.md#errors
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="iam"'}  # RFC 6750 3: every 401 of the API

STATUS_MESSAGES = {
    400: "bad request",
    401: AUTHENTICATION_REQUIRED,
    403: "permission denied",
    404: "not found",
    405: "method not allowed",
    408: "request timeout",
    413: "request body too large",
    415: "unsupported media type",
    429: "too many requests",
    500: "internal server error",
    503: "service unavailable",
}


class ApiError(Exception):
    """`hint`: one sentence that teaches the fix, answered beside the message (docs/api.md#conventions): a
    401 keeps its fixed message and teaches only there. `commit=True`: the endpoint's transaction commits
    before the error is answered, for a refusal whose writes must stand (a reused refresh token ends every
    session, then is refused)."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        headers: dict | None = None,
        *,
        hint: str | None = None,
        commit: bool = False,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = dict(headers or {})
        self.hint = hint
        self.commit = commit


def error_response(
    status: int, message: str, field: str | None = None, headers: dict | None = None, hint: str | None = None
) -> JsonResponse:
    body: dict = {"success": False, "status": status, "message": message}
    if field:
        body["field"] = field
    if hint:
        body["hint"] = hint
    response = JsonResponse(body, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def method_not_allowed(allowed: list[str]) -> ApiError:
    """405 saying which method to use (`use POST`), with the `Allow` header (RFC 9110 15.5.6)."""
    return ApiError(405, f"use {' or '.join(allowed)}", headers={"Allow": ", ".join(allowed)})


def _from_drf(exc: exceptions.APIException) -> ApiError:
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return ApiError(401, AUTHENTICATION_REQUIRED, headers=BEARER_CHALLENGE)
    if isinstance(exc, exceptions.ParseError):
        return ApiError(400, MALFORMED_JSON)
    if isinstance(exc, exceptions.Throttled):
        return ApiError(429, STATUS_MESSAGES[429], headers={"Retry-After": str(int(exc.wait or 1))})
    if isinstance(exc, exceptions.ValidationError):
        return ApiError(400, INVALID_STRUCTURE)
    status = exc.status_code
    return ApiError(status, STATUS_MESSAGES.get(status, str(exc.detail).lower()))


def exception_handler(exc: Exception, context: dict) -> JsonResponse | None:
    if isinstance(exc, ApiError):
        error = exc
    elif isinstance(exc, RequestDataTooBig):
        error = ApiError(413, STATUS_MESSAGES[413])
    elif isinstance(exc, Http404):
        error = ApiError(404, STATUS_MESSAGES[404])
    elif isinstance(exc, PermissionDenied):
        error = ApiError(403, STATUS_MESSAGES[403])
    elif isinstance(exc, exceptions.MethodNotAllowed):
        error = method_not_allowed(context["view"].allowed_methods)
    elif isinstance(exc, exceptions.APIException):
        error = _from_drf(exc)
    elif timeouts.timed_out(exc):  # docs/api.md#quotas-and-budgets
        error = ApiError(503, timeouts.TOO_LONG)
    else:
        return None  # unexpected: Django logs it and JsonErrorsMiddleware renders the 500
    return error_response(error.status, error.message, error.field, error.headers, error.hint)
