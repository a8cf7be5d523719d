"""Credential endpoints (SPEC 4 Credentials, CONTRACT 2, 3, 6, 12): workspace-scoped, no create. Every
credential lives in the root workspace; its secret, status, identity and deletion are operators' alone."""

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.list_endpoint import ListEndpoint
from rbac.api import RecordEndpoint

from . import services
from .models import Credential
from .serializers import CredentialDeleted, CredentialRef, CredentialSerializer, CredentialUpdateRequest

LOOKUP = ("id", "account_id", "provider_id", "email")


def lookup(data: dict) -> dict:
    return {name: data[name] for name in LOOKUP if data.get(name) is not None}


class CredentialEndpoint(RecordEndpoint):
    """A credential named by CONTRACT 12's keys (`services.find_credential`); what only an operator may
    change is `policy.authorize`'s rule. `lock`: the write endpoints hold the row until they commit."""

    workspace_scoped = True
    lookup = LOOKUP
    lock = False
    request_serializer = CredentialRef
    response_serializer = CredentialSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Credential.objects.in_workspace(request.workspace)

    def find(self, request: Request, data: dict) -> Credential | None:
        return services.find_credential(request.workspace, **lookup(data), lock=self.lock)

    def call(self, service: Callable[..., Any], target: Any, changes: dict, request: Request) -> Any:
        return service(target, **changes)  # credentials record no actor: only operators change them


class CredentialDescribe(CredentialEndpoint, route="credentials/describe"):
    read_only = True
    permission = "credentials:describe"


class CredentialList(ListEndpoint, route="credentials/list"):
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


class CredentialUpdate(CredentialEndpoint, route="credentials/update"):
    permission = "credentials:update"
    lock = True
    request_serializer = CredentialUpdateRequest
    service = services.update_credential


class CredentialDelete(CredentialEndpoint, route="credentials/delete"):
    permission = "credentials:delete"
    lock = True
    response_serializer = CredentialDeleted
    service = services.delete_credential
