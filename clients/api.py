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
from rbac.api import RecordEndpoint, RecordList

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


class ClientValidate(Endpoint, route="clients/validate"):
    """CONTRACT 7. Public: the client authenticates itself with its id and secret in the body."""

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


class ClientEndpoint(RecordEndpoint):
    """A client of the workspace, named by `id`, answered with its workspace embedded (SPEC 2)."""

    model = Client
    ref = ClientRef
    response_serializer = ClientSerializer

    def find(self, request: Request, data: dict) -> Client:
        return services.get_client(request.workspace, id=data["id"])  # its own 404 names the field


class ClientCreate(ClientEndpoint, route="clients/create"):
    """A new client of the `X-Workspace` workspace with its secret, which is answered here and by
    `clients/regenerate-secret` only and never stored in plaintext (CONTRACT 7). With an `endpoint`, the
    client gets the workspace's push events (CONTRACT 8)."""

    request_serializer = ClientCreateRequest
    response_serializer = ClientWithSecret

    def handle(self, request: Request, data: dict) -> dict:
        client, secret = services.create_client(request.workspace, **data, actor=request.user)
        client.secret = secret
        return self.serialize(client)


class ClientDescribe(ClientEndpoint, route="clients/describe"):
    """A client of the `X-Workspace` workspace by `id`, with its workspace embedded (SPEC 2) and never its
    secret, which only create and regenerate-secret answer (CONTRACT 7)."""

    read_only = True


class ClientList(RecordList, route="clients/list"):
    """The clients of the `X-Workspace` workspace, without their secrets."""

    model = Client
    list_key = "clients"
    filter_fields = {"id": "id", "workspace_id": "workspace", "name": "name", "description": "description"}
    response_serializer = ClientSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return super().get_queryset(request).select_related("workspace")  # embedded in each


class ClientUpdate(ClientEndpoint, route="clients/update"):
    """Changes a client named by `id`: its name, description, push `endpoint`, tags and meta. Its secret
    stays (`clients/regenerate-secret` replaces it)."""

    request_serializer = ClientUpdateRequest
    service = services.update_client


class ClientDelete(ClientEndpoint, route="clients/delete"):
    """Deletes a client named by `id`: its secret stops validating at once. Answers its `id`."""

    response_serializer = ClientDeleted
    service = services.delete_client


class ClientRegenerateSecret(ClientEndpoint, route="clients/regenerate-secret"):
    """A new secret for a client named by `id`, answered once; the old one stops validating at once
    (`invalid_client`, CONTRACT 7)."""

    response_serializer = SecretRegenerated

    def handle(self, request: Request, data: dict) -> dict:
        client = self.get_object(request, data)
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


class ClientEvents(Endpoint, route="clients/events"):
    """The workspace's events after a cursor, in commit order (clients/catchup.py). Public: the client
    authenticates itself with its id and secret in the body, as in `clients/validate`; a wrong pair is 401
    `invalid client`. A cursor older than IAM_EVENT_RETENTION_DAYS is 410 `cursor expired`."""

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
