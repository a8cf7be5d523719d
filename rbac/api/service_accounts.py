"""`service-accounts/create|describe|list|update|delete|create-key|revoke-key` (docs/api.md#service-accounts,
docs/api.md#api-keys)."""

from django.db.models import Prefetch, QuerySet
from rest_framework.request import Request

from iam.http.endpoint import EncodedJson, Endpoint, answer_fresh
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of, prefetch

from .. import serializers
from ..models import ServiceAccount, ServiceAccountKey
from ..services.service_accounts import (
    create_key,
    create_service_account,
    delete_service_account,
    revoke_key,
    update_service_account,
)
from .access import get_object, roles_named


def service_accounts(request: Request) -> QuerySet:
    """The service accounts of the `X-Workspace` workspace, each with its roles and their permissions."""
    return ServiceAccount.objects.in_workspace(request.workspace).prefetch_related(
        prefetch("roles"), prefetch("roles__permissions")
    )


def find(request: Request, data: dict, permission: str) -> ServiceAccount:
    return get_object(
        request, ServiceAccount.objects.in_workspace(request.workspace), permission=permission, pk=data["id"]
    )


class ServiceAccountCreate(Endpoint):
    """A new service account of the `X-Workspace` workspace holding `role_ids`: roles of this workspace
    whose permissions the caller's own grants cover (else 403 `cannot grant permissions you do not hold`).
    It has no key yet: `service-accounts/create-key` makes one."""

    summary = "Create a service account"
    permission = "service-accounts:create"
    workspace_scoped = True
    request_serializer = serializers.ServiceAccountCreateRequest
    response_serializer = serializers.ServiceAccountSerializer
    example_request = {
        "name": "billing-sync",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        fields = changes_of(data, "role_ids")
        roles = roles_named(request, data["role_ids"])
        service_account = create_service_account(request.workspace, **fields, roles=roles, actor=request.user)
        return answer_fresh(request, self.response_serializer, service_accounts(request), service_account)


class ServiceAccountDescribe(Endpoint):
    """A service account of the `X-Workspace` workspace by `id`, with its roles and live keys (never a
    key itself)."""

    summary = "Describe a service account"
    permission = "service-accounts:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.ServiceAccountSerializer
    example_request = {"id": "7c2e9a4b-1f3d-4b6a-9e8c-2d4f6a8b1c35"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        service_account = find(request, data, self.permission)
        return answer_fresh(request, self.response_serializer, service_accounts(request), service_account)


class ServiceAccountList(ListEndpoint):
    """The service accounts of the `X-Workspace` workspace, each with its roles and live keys."""

    summary = "List the workspace's service accounts"
    permission = "service-accounts:list"
    workspace_scoped = True
    list_key = "service_accounts"
    response_serializer = serializers.ServiceAccountSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "enabled", "last_used_at")}
    page_prefetch = (
        Prefetch(
            "keys", queryset=serializers.live_keys(ServiceAccountKey.objects.all()), to_attr="live_keys"
        ),
    )
    example_request = {"filter": {"fields": {"enabled": True}}, "options": {"limit": 100}}

    def get_queryset(self, request: Request) -> QuerySet:
        return service_accounts(request)


class ServiceAccountUpdate(Endpoint):
    """Changes a service account named by `id`; `role_ids` replaces its roles (each grantable by the
    caller). A change of its roles or `enabled` acts at once on its keys, and is pushed as
    `service_account.updated`."""

    summary = "Change a service account"
    permission = "service-accounts:update"
    workspace_scoped = True
    request_serializer = serializers.ServiceAccountUpdateRequest
    response_serializer = serializers.ServiceAccountSerializer
    example_request = {"id": "7c2e9a4b-1f3d-4b6a-9e8c-2d4f6a8b1c35", "enabled": False}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        service_account = find(request, data, self.permission)
        changes = changes_of(data, "id", "role_ids")
        if "role_ids" in data:
            changes["roles"] = roles_named(request, data["role_ids"])
        update_service_account(service_account, **changes, actor=request.user)
        return answer_fresh(request, self.response_serializer, service_accounts(request), service_account)


class ServiceAccountDelete(Endpoint):
    """Deletes a service account named by `id`; its keys are refused at once."""

    summary = "Delete a service account"
    permission = "service-accounts:delete"
    workspace_scoped = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.Deleted
    example_request = {"id": "7c2e9a4b-1f3d-4b6a-9e8c-2d4f6a8b1c35"}

    def handle(self, request: Request, data: dict) -> dict:
        return delete_service_account(find(request, data, self.permission), actor=request.user)


class ServiceAccountCreateKey(Endpoint):
    """A new API key of the service account named by `id`: `key` (`iam_sk_...`) is in this answer only,
    stored as a digest. Needs grants covering every permission of the service account's roles (else 403
    `cannot grant permissions you do not hold`); at most 10 live keys per service account."""

    summary = "Create an API key of a service account"
    permission = "service-accounts:update"  # docs/api.md#authorization
    workspace_scoped = True
    request_serializer = serializers.KeyCreateRequest
    response_serializer = serializers.KeyCreated
    example_request = {
        "id": "7c2e9a4b-1f3d-4b6a-9e8c-2d4f6a8b1c35",
        "name": "production",
        "expires_at": "2027-06-30T00:00:00Z",
    }

    def handle(self, request: Request, data: dict) -> dict:
        service_account = find(request, data, self.permission)
        key, raw = create_key(
            service_account, name=data["name"], expires_at=data.get("expires_at"), actor=request.user
        )
        return self.serialize(
            {
                "id": key.pk,
                "name": key.name,
                "key": raw,
                "prefix": key.prefix,
                "created_at": key.created_at,
                "expires_at": key.expires_at,
            }
        )


class ServiceAccountRevokeKey(Endpoint):
    """Revokes the key `key_id` of the service account named by `id`: refused at once by every process.
    Another service account's key, or an unknown one: 404 `key not found`."""

    summary = "Revoke an API key of a service account"
    permission = "service-accounts:update"  # docs/api.md#authorization
    workspace_scoped = True
    request_serializer = serializers.KeyRevokeRequest
    response_serializer = serializers.KeyRevoked
    example_request = {
        "id": "7c2e9a4b-1f3d-4b6a-9e8c-2d4f6a8b1c35",
        "key_id": "0d8f2b6a-4c1e-4a3b-8f5d-9e7c1a3b5d24",
    }

    def handle(self, request: Request, data: dict) -> dict:
        service_account = find(request, data, self.permission)
        return revoke_key(service_account, data["key_id"], actor=request.user)
