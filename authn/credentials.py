"""Credential endpoints (SPEC 4 Credentials, CONTRACT 2, 3, 6, 12): workspace-scoped, no create. Every
credential lives in the root workspace; its secret, status, identity and deletion are operators' alone."""

from rest_framework.request import Request

from iam.api import Endpoint, ListEndpoint
from rbac import policy

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
        changes = {name: value for name, value in data.items() if name not in LOOKUP}
        policy.require_credential_change(request.user, changes)
        credential = services.get_credential(request.workspace, **lookup(data), lock=True)
        return self.serialize(services.update_credential(credential, changes=changes))


class CredentialDelete(Endpoint):
    permission = "credentials:delete"
    workspace_scoped = True
    request_serializer = CredentialRef
    response_serializer = CredentialDeleted

    def handle(self, request: Request, data: dict) -> dict:
        policy.require_credential_change(request.user, None)
        credential = services.get_credential(request.workspace, **lookup(data), lock=True)
        return services.delete_credential(credential)
