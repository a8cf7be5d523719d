"""Credential endpoints (SPEC 4 Credentials, CONTRACT 2, 3, 6, 12): workspace-scoped, no create. Every
credential lives in the root workspace; its secret, status, identity and deletion are operators' alone."""

from collections.abc import Callable
from typing import Any

from rest_framework.request import Request

from rbac.api import RecordEndpoint, RecordList

from . import services
from .models import Credential
from .serializers import CredentialDeleted, CredentialRef, CredentialSerializer, CredentialUpdateRequest


class CredentialEndpoint(RecordEndpoint):
    """A credential named by CONTRACT 12's keys (`services.find_credential`); what only an operator may
    change is `policy.authorize`'s rule. `lock`: the write endpoints hold the row until they commit."""

    model = Credential
    ref = CredentialRef
    lock = False
    response_serializer = CredentialSerializer

    def find(self, request: Request, data: dict) -> Credential | None:
        keys = {name: data[name] for name in self.lookup if data.get(name) is not None}
        return services.find_credential(request.workspace, **keys, lock=self.lock)

    def call(self, service: Callable[..., Any], target: Any, changes: dict, request: Request) -> Any:
        return service(target, **changes)  # credentials record no actor: only operators change them


class CredentialDescribe(CredentialEndpoint, route="credentials/describe"):
    """A credential by `id` and `account_id` together (404 when they disagree; `provider_id` and `email`,
    when given, must match too). Every credential lives in the root workspace; no secret is ever answered."""

    example_request = {
        "id": "1c6e8a2d-5f4b-4c9a-b3e7-4d2f6a8c1e95",
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
    }

    read_only = True


class CredentialList(RecordList, route="credentials/list"):
    """The credentials of the `X-Workspace` workspace (all of them live in the root workspace), without
    their secrets."""

    example_request = {
        "filter": {"fields": {"account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93", "kind": "password"}},
        "options": {"limit": 10},
    }

    model = Credential
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


class CredentialUpdate(CredentialEndpoint, route="credentials/update"):
    """Changes a credential named by `id` and `account_id`. Its secret, status and identity (`kind`,
    `provider`, `new_provider_id`, `new_email`) are an operator's alone (403 `only an operator may change
    this credential`); holders of `credentials:update` may change `tags`, `meta` and `last_used_at`."""

    example_request = {
        "id": "1c6e8a2d-5f4b-4c9a-b3e7-4d2f6a8c1e95",
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "tags": ["reviewed"],
        "meta": {"schema_version": "1"},
    }

    lock = True
    request_serializer = CredentialUpdateRequest
    service = services.update_credential


class CredentialDelete(CredentialEndpoint, route="credentials/delete"):
    """Deletes a credential named by `id` and `account_id`: an operator's alone (403 `only an operator may
    change this credential`)."""

    example_request = {
        "id": "1c6e8a2d-5f4b-4c9a-b3e7-4d2f6a8c1e95",
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
    }

    lock = True
    response_serializer = CredentialDeleted
    service = services.delete_credential
