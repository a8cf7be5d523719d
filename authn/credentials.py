"""Credential endpoints (SPEC 4 Credentials, CONTRACT 2, 6, 12): workspace-scoped, no create."""

from rest_framework.request import Request

from iam.api import Endpoint, ListEndpoint

from . import services
from .models import Credential
from .serializers import CredentialDeleted, CredentialRef, CredentialSerializer, CredentialUpdateRequest

LOOKUP = ("id", "account_id", "provider_id", "email")


def lookup(data: dict) -> dict:
    return {name: data[name] for name in LOOKUP if data.get(name) is not None}


class CredentialDescribe(Endpoint):
    read_only = True
    permission = "credentials:describe"
    workspace_scoped = True
    request_serializer = CredentialRef
    response_serializer = CredentialSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(services.get_credential(request.workspace, **lookup(data)))


class CredentialList(ListEndpoint):
    permission = "credentials:list"
    workspace_scoped = True
    list_key = "credentials"
    response_serializer = CredentialSerializer
    filter_fields = {
        "id": "id",
        "account_id": "account",
        "workspace_id": "workspace",
        "kind": "kind",
        "provider": "provider",
        "status": "status",
        "provider_id": "provider_id",
        "email": "email",
    }

    def get_queryset(self, request: Request):
        return Credential.objects.in_workspace(request.workspace)


class CredentialUpdate(Endpoint):
    permission = "credentials:update"
    workspace_scoped = True
    request_serializer = CredentialUpdateRequest
    response_serializer = CredentialSerializer

    def handle(self, request: Request, data: dict) -> dict:
        credential = services.get_credential(request.workspace, **lookup(data), lock=True)
        changes = {name: value for name, value in data.items() if name not in LOOKUP}
        return self.serialize(services.update_credential(credential, changes=changes))


class CredentialDelete(Endpoint):
    permission = "credentials:delete"
    workspace_scoped = True
    request_serializer = CredentialRef
    response_serializer = CredentialDeleted

    def handle(self, request: Request, data: dict) -> dict:
        credential = services.get_credential(request.workspace, **lookup(data), lock=True)
        return services.delete_credential(credential)
