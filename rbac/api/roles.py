"""`roles/create|describe|list|update|delete`."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import EncodedJson, Endpoint, answer_fresh
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of, prefetch
from iam.platform.service_helpers import resolve

from .. import serializers
from ..models import Permission, Role
from ..services.roles import create_role, delete_role, update_role
from .access import get_object


def roles_with_permissions(request: Request) -> QuerySet:
    """The roles of the `X-Workspace` workspace, each with its permissions (a query each, whatever the
    count)."""
    return Role.objects.in_workspace(request.workspace).prefetch_related(prefetch("permissions"))


def permissions_named(request: Request, ids: list) -> list[Permission]:
    """The permissions of the `X-Workspace` workspace that `permission_ids` names (400 for any other)."""
    permissions = Permission.objects.in_workspace(request.workspace)
    return resolve(permissions, ids, field="permission_ids")


class RoleCreate(Endpoint):
    """A new role of the `X-Workspace` workspace holding `permission_ids`: permissions of this workspace, each
    covered by the caller's own grants (else 403 `cannot grant permissions you do not hold`)."""

    summary = "Create a role"
    permission = "roles:create"
    workspace_scoped = True
    request_serializer = serializers.RoleCreateRequest
    response_serializer = serializers.RoleSerializer
    example_request = {
        "name": "billing-reader",
        "description": "Reads invoices",
        "permission_ids": ["c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18"],
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        fields = changes_of(data, "permission_ids")
        permissions = permissions_named(request, data["permission_ids"])
        role = create_role(request.workspace, **fields, permissions=permissions, actor=request.user)
        return answer_fresh(request, self.response_serializer, roles_with_permissions(request), role)


class RoleDescribe(Endpoint):
    """A role of the `X-Workspace` workspace by `id`, with each of its permissions as a whole Permission
    object."""

    summary = "Describe a role"
    permission = "roles:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.RoleSerializer
    example_request = {"id": "5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        role = get_object(
            request, Role.objects.in_workspace(request.workspace), permission=self.permission, pk=data["id"]
        )
        return answer_fresh(request, self.response_serializer, roles_with_permissions(request), role)


class RoleList(ListEndpoint):
    """The roles of the `X-Workspace` workspace, each with its permissions."""

    summary = "List the workspace's roles"
    permission = "roles:list"
    workspace_scoped = True
    list_key = "roles"
    response_serializer = serializers.RoleSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "description")}
    example_request = {"filter": {"fields": {"name": "billing-reader"}}, "options": {"limit": 100}}

    def get_queryset(self, request: Request) -> QuerySet:
        return roles_with_permissions(request)


class RoleUpdate(Endpoint):
    """Changes a role named by `id`; `permission_ids` replaces its permissions, each of this workspace and
    covered by the caller's own grants. Its holders' grants change at once."""

    summary = "Change a role"
    permission = "roles:update"
    workspace_scoped = True
    request_serializer = serializers.RoleUpdateRequest
    response_serializer = serializers.RoleSerializer
    example_request = {
        "id": "5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26",
        "permission_ids": ["c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18", "0a4c6e8b-2d1f-4b3a-9c5e-7d9f1b3a5c72"],
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        role = get_object(
            request, Role.objects.in_workspace(request.workspace), permission=self.permission, pk=data["id"]
        )
        changes = changes_of(data, "id", "permission_ids")
        if "permission_ids" in data:
            changes["permissions"] = permissions_named(request, data["permission_ids"])
        update_role(role, **changes, actor=request.user)
        return answer_fresh(request, self.response_serializer, roles_with_permissions(request), role)


class RoleDelete(Endpoint):
    """Deletes a role named by `id`; the memberships that held it lose it, and their accounts its
    permissions, at once."""

    summary = "Delete a role"
    permission = "roles:delete"
    workspace_scoped = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.Deleted
    example_request = {"id": "5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"}

    def handle(self, request: Request, data: dict) -> dict:
        role = get_object(
            request, Role.objects.in_workspace(request.workspace), permission=self.permission, pk=data["id"]
        )
        return delete_role(role, actor=request.user)
