"""Credential endpoints (docs/api.md#credentials, #x-workspace, #the-root-workspace, #answers):
workspace-scoped, no create. Every credential lives in the root workspace; its secret, status, identity and
deletion are operators' alone."""

from django.db.models import QuerySet
from rest_framework.request import Request

from accounts.models import normalize_email
from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of
from rbac.api.access import get_object

from ..credentials import delete_credential, update_credential
from ..models import Credential
from ..serializers import CredentialDeleted, CredentialRef, CredentialSerializer, CredentialUpdateRequest

CREDENTIAL_KEYS = ("id", "account_id", "provider_id", "email")  # CredentialRef's fields


def credential_named(request: Request, data: dict, *, permission: str, lock: bool) -> Credential:
    """The credential the body names: `id` and `account_id` together, `provider_id` and `email` when
    sent (docs/api.md#credentials; `lock`: the row is held until the request commits), through the one
    policy: 404 `credential not found` outside the `X-Workspace` workspace, then what only an operator
    may change."""
    keys = {name: data[name] for name in CREDENTIAL_KEYS if data.get(name) is not None}
    if "email" in keys:
        keys["email"] = normalize_email(keys["email"])
    credentials = Credential.objects.in_workspace(request.workspace).select_related("account")
    if lock:
        credentials = credentials.select_for_update()
    return get_object(request, credentials, permission=permission, fields=data, **keys)


class CredentialDescribe(Endpoint):
    """A credential by `id` and `account_id` together (404 when they disagree; `provider_id` and `email`,
    when given, must match too). Every credential lives in the root workspace; no secret is ever answered."""

    summary = "Describe a credential"
    example_request = {
        "id": "1c6e8a2d-5f4b-4c9a-b3e7-4d2f6a8c1e95",
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
    }

    permission = "credentials:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = CredentialRef
    response_serializer = CredentialSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(credential_named(request, data, permission=self.permission, lock=False))


class CredentialList(ListEndpoint):
    """The credentials of the `X-Workspace` workspace (all of them live in the root workspace), without
    their secrets."""

    summary = "List credentials"
    example_request = {
        "filter": {"fields": {"account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93", "kind": "password"}},
        "options": {"limit": 10},
    }

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

    def get_queryset(self, request: Request) -> QuerySet:
        return Credential.objects.in_workspace(request.workspace)


class CredentialUpdate(Endpoint):
    """Changes a credential named by `id` and `account_id`. Its secret, status and identity (`kind`,
    `provider`, `new_provider_id`, `new_email`) are an operator's alone (403 `only an operator may change
    this credential`); holders of `credentials:update` may change `tags`, `meta` and `last_used_at`."""

    summary = "Change a credential"
    example_request = {
        "id": "1c6e8a2d-5f4b-4c9a-b3e7-4d2f6a8c1e95",
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "tags": ["reviewed"],
        "meta": {"schema_version": "1"},
    }

    permission = "credentials:update"
    workspace_scoped = True
    request_serializer = CredentialUpdateRequest
    response_serializer = CredentialSerializer

    def handle(self, request: Request, data: dict) -> dict:
        credential = credential_named(request, data, permission=self.permission, lock=True)
        # Credentials record no actor: only operators change what matters in them.
        return self.serialize(update_credential(credential, **changes_of(data, *CREDENTIAL_KEYS)))


class CredentialDelete(Endpoint):
    """Deletes a credential named by `id` and `account_id`: an operator's alone (403 `only an operator may
    change this credential`)."""

    summary = "Delete a credential"
    example_request = {
        "id": "1c6e8a2d-5f4b-4c9a-b3e7-4d2f6a8c1e95",
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
    }

    permission = "credentials:delete"
    workspace_scoped = True
    request_serializer = CredentialRef
    response_serializer = CredentialDeleted

    def handle(self, request: Request, data: dict) -> dict:
        credential = credential_named(request, data, permission=self.permission, lock=True)
        return delete_credential(credential)
