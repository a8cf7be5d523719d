from django.db.models import QuerySet
from rest_framework.request import Request

from iam.api import Endpoint, ListEndpoint

from . import services, validation
from .models import Client
from .serializers import (
    ClientCreateRequest,
    ClientDeleted,
    ClientRef,
    ClientSerializer,
    ClientUpdateRequest,
    ClientWithSecret,
    SecretRegenerated,
    ValidateRequest,
    ValidateResponse,
)


class ClientCreate(Endpoint):
    permission = "clients:create"
    workspace_scoped = True
    request_serializer = ClientCreateRequest
    response_serializer = ClientWithSecret

    def handle(self, request: Request, data: dict) -> dict:
        client, secret = services.create_client(request.workspace, **data, actor=request.user)
        client.secret = secret
        return self.serialize(client)


class ClientDescribe(Endpoint):
    permission = "clients:describe"
    workspace_scoped = True
    request_serializer = ClientRef
    response_serializer = ClientSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(services.get_client(request.workspace, id=data["id"]))


class ClientList(ListEndpoint):
    permission = "clients:list"
    workspace_scoped = True
    list_key = "clients"
    filter_fields = {"id": "id", "workspace_id": "workspace", "name": "name", "description": "description"}
    response_serializer = ClientSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Client.objects.in_workspace(request.workspace).select_related("workspace")


class ClientUpdate(Endpoint):
    permission = "clients:update"
    workspace_scoped = True
    request_serializer = ClientUpdateRequest
    response_serializer = ClientSerializer

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data.pop("id"))
        return self.serialize(services.update_client(client, data, actor=request.user))


class ClientDelete(Endpoint):
    permission = "clients:delete"
    workspace_scoped = True
    request_serializer = ClientRef
    response_serializer = ClientDeleted

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        client_id = client.pk
        services.delete_client(client, actor=request.user)
        return {"id": str(client_id)}


class ClientRegenerateSecret(Endpoint):
    permission = "clients:regenerate-secret"
    workspace_scoped = True
    request_serializer = ClientRef
    response_serializer = SecretRegenerated

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        return {"id": str(client.pk), "secret": services.regenerate_secret(client, actor=request.user)}


class ClientValidate(Endpoint):
    """CONTRACT 7. Public: the client authenticates itself with its id and secret in the body."""

    public = True
    request_serializer = ValidateRequest
    response_serializer = ValidateResponse

    def handle(self, request: Request, data: dict) -> dict:
        return validation.validate(**data)
