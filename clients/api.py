"""The client endpoints, listed by path in clients/urls.py: `clients/validate` and `clients/events`, which
a client service calls with its own id and secret (public, each with its fast body reader), and the
workspace's client management (create, describe, list, update, delete, regenerate-secret)."""

import functools
import uuid

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request

from iam import metrics, parsers
from iam.api import JSON_RENDERER, Endpoint, envelope
from iam.errors import ApiError
from iam.fields import PERMISSION_NAME_MAX, PERMISSION_NAME_RE
from iam.list_endpoint import ListEndpoint

from . import catchup, services, validation
from .models import Client
from .serializers import (
    ClientCreateRequest,
    ClientDeleted,
    ClientRef,
    ClientSerializer,
    ClientUpdateRequest,
    ClientWithSecret,
    EventsPage,
    EventsRequest,
    SecretRegenerated,
    ValidateRequest,
    ValidateResponse,
)


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
            return HttpResponse(JSON_RENDERER.render(envelope(answer(data))), content_type="application/json")

        return fast_view

    @staticmethod
    def fast_body(request: HttpRequest) -> dict | None:
        """The request's fields when the body is exactly what a calling service sends, else None. It reads
        the body with the one parser (`iam.parsers.loads`: depth, lone surrogates, NUL, number ranges), and
        leaves whatever that refuses to the full endpoint, which answers its 400."""
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


# The client endpoints load the client the body names with `services.get_client`: a client of the
# `X-Workspace` workspace with its workspace (embedded in each answer), else 404 `client not found` naming
# the field `id`. No rule of the policy depends on a client itself, so the permission checked before the
# body is the whole decision.


class ClientCreate(Endpoint):
    """A new client of the `X-Workspace` workspace with its secret, which is answered here and by
    `clients/regenerate-secret` only and never stored in plaintext. The secret has the Standard Webhooks form
    `whsec_<base64>`: pass it unchanged to `clients/validate` and to a Standard Webhooks library. With an
    `endpoint`, the client gets the workspace's push events, signed with that secret; an endpoint on a
    loopback, private or link-local address is refused unless the service allows it
    (`IAM_WEBHOOK_ALLOW_PRIVATE`)."""

    summary = "Create a client service"
    permission = "clients:create"
    workspace_scoped = True
    request_serializer = ClientCreateRequest
    response_serializer = ClientWithSecret
    example_request = {
        "name": "billing-service",
        "endpoint": "https://billing.example.com/iam-events",
        "description": "Billing backend",
        "tags": ["backend"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> dict:
        client, secret = services.create_client(request.workspace, **data, actor=request.user)
        client.secret = secret
        return self.serialize(client)


class ClientDescribe(Endpoint):
    """A client of the `X-Workspace` workspace by `id`, with its workspace embedded and never its secret,
    which only create and regenerate-secret answer."""

    summary = "Describe a client"
    permission = "clients:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = ClientRef
    response_serializer = ClientSerializer
    example_request = {"id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38"}

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        return self.serialize(client)


class ClientList(ListEndpoint):
    """The clients of the `X-Workspace` workspace, without their secrets."""

    summary = "List the workspace's clients"
    permission = "clients:list"
    workspace_scoped = True
    list_key = "clients"
    response_serializer = ClientSerializer
    filter_fields = {"id": "id", "workspace_id": "workspace", "name": "name", "description": "description"}
    example_request = {"filter": {"fields": {"name": "billing-service"}}, "options": {"limit": 10}}

    def get_queryset(self, request: Request) -> QuerySet:
        return Client.objects.in_workspace(request.workspace).select_related("workspace")  # embedded in each


class ClientUpdate(Endpoint):
    """Changes a client named by `id`: its name, description, push `endpoint`, tags and meta. Its secret
    stays (`clients/regenerate-secret` replaces it)."""

    summary = "Change a client"
    permission = "clients:update"
    workspace_scoped = True
    request_serializer = ClientUpdateRequest
    response_serializer = ClientSerializer
    example_request = {
        "id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38",
        "endpoint": "https://billing.example.com/hooks/iam",
        "tags": ["backend", "eu"],
    }

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        changes = {name: value for name, value in data.items() if name != "id"}
        return self.serialize(services.update_client(client, **changes, actor=request.user))


class ClientDelete(Endpoint):
    """Deletes a client named by `id`: its secret stops validating at once. Answers its `id`."""

    summary = "Delete a client"
    permission = "clients:delete"
    workspace_scoped = True
    request_serializer = ClientRef
    response_serializer = ClientDeleted
    example_request = {"id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38"}

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        return services.delete_client(client, actor=request.user)


class ClientRegenerateSecret(Endpoint):
    """A new secret for a client named by `id`, answered once; the old one stops validating at once
    (`authorized: false`, `reason: "invalid_client"`) and stops signing pushes."""

    summary = "Issue a new client secret"
    permission = "clients:regenerate-secret"
    workspace_scoped = True
    request_serializer = ClientRef
    response_serializer = SecretRegenerated
    example_request = {"id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38"}

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        return {"id": str(client.pk), "secret": services.regenerate_secret(client, actor=request.user)}


def answer(data: dict) -> dict:
    """The validation, counted by reason; with `explain`, the grant paths behind it (issue 15)."""
    data = dict(data)
    explain = data.pop("explain", False)
    result = validation.validate(**data)
    metrics.VALIDATIONS.labels(result["reason"] or "ok").inc()
    if explain:
        return validation.explained(
            result, permission=data.get("permission"), project_id=data.get("project_id")
        )
    return result


class ClientEvents(Endpoint):
    """The workspace's events after a cursor, in commit order. Public: the client authenticates itself with
    its id and secret in the body, as in `clients/validate`; a wrong pair is 401 `invalid client`. A cursor
    older than IAM_EVENT_RETENTION_DAYS is 410 `cursor expired`."""

    summary = "Read the workspace's events after a cursor"
    example_request = {
        "client_id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38",
        "client_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwz0nF3yNp7Aw=",
        "after": None,
        "limit": 100,
    }

    public = True
    read_only = True  # plain reads, each statement its own snapshot (see clients/catchup.py)
    error_statuses = (401, 410)
    request_serializer = EventsRequest
    response_serializer = EventsPage

    def handle(self, request: Request, data: dict) -> dict:
        client = catchup.authenticate(data["client_id"], data["client_secret"])
        return catchup.read(client.workspace_id, after=data.get("after"), limit=data["limit"])


FAST_FIELDS = frozenset({"client_id", "client_secret", "token", "permission", "project_id", "explain"})


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
        if permission is not None:
            data["permission"] = permission
        if project_id is not None:
            data["project_id"] = uuid.UUID(project_id)
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
        or not isinstance(data.get("explain", False), bool)
    ):
        return None
    return data
