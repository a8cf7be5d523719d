"""`permissions/create|describe|list|update|delete|check`."""

from django.db.models import QuerySet
from rest_framework.request import Request

from accounts.models import Account
from iam.http.endpoint import Endpoint
from iam.http.errors import ApiError
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of

from .. import serializers
from ..explain import explain
from ..models import Permission
from ..services.permissions import create_permission, delete_permission, update_permission
from .access import get_object, named_by, project_named


def permissions_in(request: Request) -> QuerySet:
    return Permission.objects.in_workspace(request.workspace)


class PermissionCreate(Endpoint):
    """A new permission of the `X-Workspace` workspace: `name` is `*` or `resource:action`, either side `*` or
    letters, digits, `_`, `.` and `-` (at most 128 characters). The caller's own grants must cover the name:
    nobody grants what they do not hold (403 `cannot grant permissions you do not hold`)."""

    summary = "Create a permission"
    permission = "permissions:create"
    workspace_scoped = True
    request_serializer = serializers.PermissionCreateRequest
    response_serializer = serializers.PermissionSerializer
    example_request = {
        "name": "invoices:read",
        "code": "invoices:read",
        "description": "Read invoices",
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> dict:
        created = create_permission(request.workspace, **data, actor=request.user)
        return self.serialize(created)


class PermissionDescribe(Endpoint):
    """A permission of the `X-Workspace` workspace by `id` or `code`; one of another workspace is not
    found (404)."""

    summary = "Describe a permission"
    permission = "permissions:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.PermissionRef
    response_serializer = serializers.PermissionSerializer
    example_request = {"code": "invoices:read"}

    def handle(self, request: Request, data: dict) -> dict:
        found = get_object(
            request,
            permissions_in(request),
            permission=self.permission,
            **named_by(data, "id", "code"),  # both must match when both are given
        )
        return self.serialize(found)


class PermissionList(ListEndpoint):
    """The permissions of the `X-Workspace` workspace."""

    summary = "List the workspace's permissions"
    permission = "permissions:list"
    workspace_scoped = True
    list_key = "permissions"
    response_serializer = serializers.PermissionSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "code", "description")}
    example_request = {"filter": {"fields": {"name": "invoices:read"}}, "options": {"limit": 100}}

    def get_queryset(self, request: Request) -> QuerySet:
        return permissions_in(request)


class PermissionUpdate(Endpoint):
    """Changes a permission named by `id` (`code` is a change here). A new `name` must be covered by the
    caller's own grants; the roles holding the permission keep it."""

    summary = "Change a permission"
    permission = "permissions:update"
    workspace_scoped = True
    request_serializer = serializers.PermissionUpdateRequest
    response_serializer = serializers.PermissionSerializer
    example_request = {
        "id": "c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18",
        "description": "Read and export invoices",
    }

    def handle(self, request: Request, data: dict) -> dict:
        found = get_object(request, permissions_in(request), permission=self.permission, pk=data["id"])
        updated = update_permission(found, **changes_of(data, "id"), actor=request.user)
        return self.serialize(updated)


class PermissionDelete(Endpoint):
    """Deletes a permission named by `id`; the roles that held it lose it, and so do their holders, at
    once."""

    summary = "Delete a permission"
    permission = "permissions:delete"
    workspace_scoped = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.Deleted
    example_request = {"id": "c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18"}

    def handle(self, request: Request, data: dict) -> dict:
        found = get_object(request, permissions_in(request), permission=self.permission, pk=data["id"])
        return delete_permission(found, actor=request.user)


class PermissionCheck(Endpoint):
    """Why may (or may not) this account do this here? The decision `clients/validate` makes for the
    account in the `X-Workspace` workspace, with every grant path behind it (`rbac.explain.explain`)."""

    summary = "Explain whether an account holds a permission"
    permission = "permissions:check"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.PermissionCheckRequest
    response_serializer = serializers.PermissionCheckResult
    example_request = {
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "permission": "invoices:read",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
    }

    def handle(self, request: Request, data: dict) -> dict:
        account = Account.objects.filter(pk=data["account_id"]).first()
        if account is None:
            raise ApiError(400, "account_id must name an existing account", "account_id")
        project_id = data.get("project_id")
        if project_id is not None:
            project_named(request, project_id)
        return explain(account, request.workspace.pk, data["permission"], project_id=project_id)
