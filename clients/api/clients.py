"""`clients/create|describe|list|update|delete|regenerate-secret`."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint

from .. import serializers, services
from ..models import Client

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
    request_serializer = serializers.ClientCreateRequest
    response_serializer = serializers.ClientWithSecret
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
    request_serializer = serializers.ClientRef
    response_serializer = serializers.ClientSerializer
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
    response_serializer = serializers.ClientSerializer
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
    request_serializer = serializers.ClientUpdateRequest
    response_serializer = serializers.ClientSerializer
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
    request_serializer = serializers.ClientRef
    response_serializer = serializers.ClientDeleted
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
    request_serializer = serializers.ClientRef
    response_serializer = serializers.SecretRegenerated
    example_request = {"id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38"}

    def handle(self, request: Request, data: dict) -> dict:
        client = services.get_client(request.workspace, id=data["id"])
        return {"id": str(client.pk), "secret": services.regenerate_secret(client, actor=request.user)}
