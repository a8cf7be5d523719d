"""Admin for permissions, roles and memberships, through `rbac.services`: a role's permissions or a
membership's roles changed here purge the workspace's cached grants and record the push event, exactly as
over the API. Also registers workspaces (`tenancy/admin.py`), adding what needs RBAC: the owner set-up of
a new workspace and its roles on its page."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from iam.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceForm, api_fields
from tenancy.admin import InWorkspaceAdmin, WorkspaceAdmin
from tenancy.models import Workspace
from tenancy.serializers import WorkspaceCreateRequest

from . import services
from .models import Membership, Permission, Role
from .serializers import (
    MembershipCreateRequest,
    MembershipSerializer,
    MembershipUpdateRequest,
    PermissionCreateRequest,
    PermissionSerializer,
    PermissionUpdateRequest,
    RoleCreateRequest,
    RoleSerializer,
    RoleUpdateRequest,
)


class RoleInline(ReadOnlyInline):
    model = Role
    fields = ("name", "description", "created_at")


class PermissionInline(ReadOnlyInline):
    model = Permission
    fields = ("name", "code", "description", "created_at")


class RbacWorkspaceAdmin(WorkspaceAdmin):
    create_request = WorkspaceCreateRequest
    inlines = (*WorkspaceAdmin.inlines, RoleInline, PermissionInline)

    def create(self, request: HttpRequest, form: ServiceForm) -> Workspace:
        # CONTRACT 4: the creator becomes the owner
        return services.create_workspace(**form.values(), owner=request.user)


admin.site.register(Workspace, RbacWorkspaceAdmin)


@admin.register(Permission)
class PermissionAdmin(InWorkspaceAdmin):
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(PermissionSerializer)
    create_request = PermissionCreateRequest
    update_request = PermissionUpdateRequest
    create_service = staticmethod(services.create_permission)
    update_service = staticmethod(services.update_permission)
    delete_service = staticmethod(services.delete_permission)


def names_column(relation: str) -> Callable[[Any, Any], str]:
    """A column of a role's permissions, a membership's roles, by name (prefetched by `InWorkspaceAdmin`
    and the account page's inline)."""

    @admin.display(description=relation)
    def column(model_admin: Any, record: Any) -> str:
        return ", ".join(sorted(related.name for related in getattr(record, relation).all()))

    return column


@admin.register(Role)
class RoleAdmin(InWorkspaceAdmin):
    list_display = ("name", "workspace", "permission_names", "created_at", "id")
    permission_names = names_column("permissions")
    search_fields = ("name", "=id", "workspace__slug")
    fields = api_fields(RoleSerializer)
    create_request = RoleCreateRequest
    update_request = RoleUpdateRequest
    create_service = staticmethod(services.create_role)
    update_service = staticmethod(services.update_role)
    delete_service = staticmethod(services.delete_role)


@admin.register(Membership)
class MembershipAdmin(InWorkspaceAdmin):
    list_display = ("account", "workspace", "project", "scope", "status", "role_names", "created_at")
    role_names = names_column("roles")
    list_filter = ("status", "scope", "workspace")
    search_fields = ("account__email", "account__name", "workspace__slug", "=id")
    list_select_related = ("account", "workspace", "project")
    ordering = ("workspace__slug", "account__email")
    raw_id_fields = ("account", "workspace", "project")
    fields = api_fields(MembershipSerializer)
    readonly_fields = (*RESOURCE_READONLY, "accepted_at")
    fixed_on_change = ("account", "workspace")
    create_request = MembershipCreateRequest
    update_request = MembershipUpdateRequest
    create_service = staticmethod(services.create_membership)
    update_service = staticmethod(services.update_membership)
    delete_service = staticmethod(services.delete_membership)
