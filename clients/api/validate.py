"""`clients/validate`: the hot path other services call on every request they serve."""

import functools
import uuid

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request

from iam.http import parsers
from iam.http.endpoint import JSON_RENDERER, Endpoint, envelope
from iam.http.errors import ApiError, error_response
from iam.http.fields import PERMISSION_NAME_MAX, PERMISSION_NAME_RE
from iam.platform import metrics

from .. import validation
from ..serializers import ValidateRequest, ValidateResponse


def _is_permission_name(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= PERMISSION_NAME_MAX
        and bool(PERMISSION_NAME_RE.fullmatch(value))
    )


class ClientValidate(Endpoint):
    """Validates a user's access token for a client service. Public: the client authenticates itself with its
    id and secret in the body. The answer is always 200 for a well-formed body: `authorized` is true only when
    the client id and secret match, the token is a valid, unexpired, unrevoked access token of an enabled
    account, that account has an active membership in the client's workspace, and the token's session
    meets the workspace's MFA policy (`mfa_required`: two factors, or that workspace's own SSO); else
    `reason` says why (`invalid_client`, `invalid_token`, `token_expired`, `token_revoked`,
    `account_disabled`, `not_a_member`, `mfa_required`).
    `roles` and `permissions` are the account's there (project-scope ones only when `project_id` names their
    project); `allowed` answers `permission` (null when none was asked); `expires_at` is the token's
    expiry."""

    summary = "Validate an access token for a client service"
    example_request = {
        "client_id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38",
        "client_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwz0nF3yNp7Aw=",
        "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl",
        "permission": "invoices:read",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
    }

    public = True
    read_only = True  # answers from the cache or plain reads: no transaction on the hot path
    request_serializer = ValidateRequest
    response_serializer = ValidateResponse

    @classmethod
    def as_view(cls, **initkwargs):
        """The benchmarked hot path: a well-formed POST is answered without DRF's request, negotiation and
        response layers (they cost more than the validation); anything else (another method, a body the
        fast path does not take) goes through the full endpoint, which words every error."""
        view = super().as_view(**initkwargs)

        @functools.wraps(view)  # keeps `cls` and `csrf_exempt` for the schema and the CSRF middleware
        def fast_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            data = cls.fast_body(request) if request.method == "POST" else None
            if data is None:
                return view(request, *args, **kwargs)
            try:
                payload = answer(data)
            except ApiError as exc:  # `workspace_id` from a client outside the root workspace
                return error_response(exc.status, exc.message, exc.field)
            return HttpResponse(JSON_RENDERER.render(envelope(payload)), content_type="application/json")

        return fast_view

    @staticmethod
    def fast_body(request: HttpRequest) -> dict | None:
        """The request's fields when the body is exactly what a calling service sends, else None. It reads
        the body with the one parser (`iam.http.parsers.loads`: depth, lone surrogates, NUL, number ranges),
        and leaves whatever that refuses to the full endpoint, which answers its 400."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        if not 0 < length <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return None
        try:
            body = parsers.loads(request.body)
        except ApiError:
            return None
        return read_validate_body(body)

    def read_body(self, request: Request) -> dict:
        data = read_validate_body(request.data)
        return super().read_body(request) if data is None else data

    def handle(self, request: Request, data: dict) -> dict:
        return answer(data)


def answer(data: dict) -> dict:
    """The validation, counted by reason; with `explain`, the grant paths behind it."""
    data = dict(data)
    explain = data.pop("explain", False)
    result = validation.validate(**data)
    metrics.VALIDATIONS.labels(result["reason"] or "ok").inc()
    if explain:
        return validation.explained(
            result, permission=data.get("permission"), project_id=data.get("project_id")
        )
    return result


FAST_FIELDS = frozenset(
    {"client_id", "client_secret", "token", "permission", "project_id", "workspace_id", "explain"}
)


def read_validate_body(body: object) -> dict | None:
    """A well-formed body read without the serializer's machinery (a third of the request's time); None
    for anything unusual, which the serializer then words as a 400."""
    if not isinstance(body, dict) or not body.keys() <= FAST_FIELDS:
        return None  # a field this reader does not know: the serializer decides what it means
    try:
        data = {
            "client_id": uuid.UUID(body["client_id"]),
            "client_secret": body["client_secret"],
            "token": body["token"],
        }
        permission, project_id = body.get("permission"), body.get("project_id")
        workspace_id = body.get("workspace_id")
        if permission is not None:
            data["permission"] = permission
        if project_id is not None:
            data["project_id"] = uuid.UUID(project_id)
        if workspace_id is not None:
            data["workspace_id"] = uuid.UUID(workspace_id)
        if body.get("explain") is not None:
            data["explain"] = body["explain"]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if (
        not isinstance(body["client_id"], str)
        or not isinstance(data["client_secret"], str)
        or not 0 < len(data["client_secret"]) <= ValidateRequest.SECRET_MAX
        or not isinstance(data["token"], str)
        or not 0 < len(data["token"]) <= ValidateRequest.TOKEN_MAX
        or not (permission is None or _is_permission_name(permission))
        or not (project_id is None or isinstance(project_id, str))
        or not (workspace_id is None or isinstance(workspace_id, str))
        or not isinstance(data.get("explain", False), bool)
    ):
        return None
    return data
