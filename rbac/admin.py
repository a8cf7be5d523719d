"""Admin for permissions, roles and memberships, through `rbac.services`: a role's permissions or a
membership's roles changed here purge the workspace's cached grants and record the push event, exactly as
over the API. Also registers workspaces (`tenancy/admin.py`), adding what needs RBAC: the owner set-up of
a new workspace and its roles on its page."""

from typing import Any

from django import forms
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


class InWorkspaceChoices(forms.ModelMultipleChoiceField):
    """Permissions and roles carry their workspace in their label: names repeat across workspaces."""

    def label_from_instance(self, obj: Permission | Role) -> str:
        return f"{obj.workspace.slug}: {obj.name}"


def scope_choices(form: forms.ModelForm, field: str, workspace: Workspace | None) -> None:
    """On a change form the choices are the workspace's own; on the add form `clean` checks them."""
    if field in form.fields:
        queryset = form.fields[field].queryset.select_related("workspace")
        if workspace is not None:
            queryset = queryset.filter(workspace=workspace)
        form.fields[field].queryset = queryset


def saved_workspace(form: forms.ModelForm) -> Workspace | None:
    """The workspace of the row a change form edits (`None` on the add form, where the ids are preset)."""
    return None if form.instance._state.adding else form.instance.workspace


def outside(workspace: Workspace, records) -> bool:
    return any(record.workspace_id != workspace.pk for record in records)


class WorkspaceCreationForm(ServiceForm):
    create_request = WorkspaceCreateRequest


class RoleInline(ReadOnlyInline):
    model = Role
    fields = ("name", "description", "created_at")
    readonly_fields = fields


class PermissionInline(ReadOnlyInline):
    model = Permission
    fields = ("name", "code", "description", "created_at")
    readonly_fields = fields


class RbacWorkspaceAdmin(WorkspaceAdmin):
    add_form = WorkspaceCreationForm
    inlines = (*WorkspaceAdmin.inlines, RoleInline, PermissionInline)

    def create(self, request: HttpRequest, form: ServiceForm) -> Workspace:
        # CONTRACT 4: the creator becomes the owner
        return services.create_workspace(**form.values(), owner=request.user)


admin.site.register(Workspace, RbacWorkspaceAdmin)


class PermissionForm(ServiceForm):
    create_request = PermissionCreateRequest
    update_request = PermissionUpdateRequest


@admin.register(Permission)
class PermissionAdmin(InWorkspaceAdmin):
    form = PermissionForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(PermissionSerializer)

    def create(self, request: HttpRequest, form: ServiceForm) -> Permission:
        return services.create_permission(form.cleaned_data["workspace"], **form.values(), actor=request.user)

    def update(self, request: HttpRequest, current: Permission, form: ServiceForm) -> Permission:
        return services.update_permission(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: Permission) -> None:
        services.delete_permission(obj, actor=request.user)


def names(related) -> str:
    return ", ".join(sorted(record.name for record in related.all()))


class RoleForm(ServiceForm):
    create_request = RoleCreateRequest
    update_request = RoleUpdateRequest

    permissions = InWorkspaceChoices(
        queryset=Permission.objects.all(),
        required=False,
        widget=admin.widgets.FilteredSelectMultiple("permissions", is_stacked=False),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        scope_choices(self, "permissions", saved_workspace(self))

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        workspace = cleaned.get("workspace") or saved_workspace(self)
        if workspace is not None and outside(workspace, cleaned.get("permissions") or []):
            self.add_error("permissions", "permission_ids must name permissions of this workspace")


@admin.register(Role)
class RoleAdmin(InWorkspaceAdmin):
    form = RoleForm
    list_display = ("name", "workspace", "permission_names", "created_at", "id")
    search_fields = ("name", "=id", "workspace__slug")
    fields = api_fields(RoleSerializer)
    prefetched = ("permissions",)

    @admin.display(description="permissions")
    def permission_names(self, role: Role) -> str:
        return names(role.permissions)

    def create(self, request: HttpRequest, form: ServiceForm) -> Role:
        return services.create_role(form.cleaned_data["workspace"], **form.values(), actor=request.user)

    def update(self, request: HttpRequest, current: Role, form: ServiceForm) -> Role:
        return services.update_role(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: Role) -> None:
        services.delete_role(obj, actor=request.user)


class MembershipForm(ServiceForm):
    create_request = MembershipCreateRequest
    update_request = MembershipUpdateRequest

    roles = InWorkspaceChoices(
        queryset=Role.objects.all(),
        required=False,
        widget=admin.widgets.FilteredSelectMultiple("roles", is_stacked=False),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        scope_choices(self, "roles", saved_workspace(self))

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        workspace = cleaned.get("workspace") or saved_workspace(self)
        project = cleaned.get("project")
        if workspace is not None and outside(workspace, cleaned.get("roles") or []):
            self.add_error("roles", "role_ids must name roles of this workspace")
        if workspace is not None and project is not None and project.workspace_id != workspace.pk:
            self.add_error("project", "project_id must name a project of this workspace")


@admin.register(Membership)
class MembershipAdmin(InWorkspaceAdmin):
    form = MembershipForm
    list_display = ("account", "workspace", "project", "scope", "status", "role_names", "created_at")
    list_filter = ("status", "scope", "workspace")
    search_fields = ("account__email", "account__name", "workspace__slug", "=id")
    list_select_related = ("account", "workspace", "project")
    ordering = ("workspace__slug", "account__email")
    raw_id_fields = ("account", "workspace", "project")
    fields = api_fields(MembershipSerializer)
    readonly_fields = (*RESOURCE_READONLY, "accepted_at")
    fixed_on_change = ("account", "workspace")
    prefetched = ("roles",)

    @admin.display(description="roles")
    def role_names(self, membership: Membership) -> str:
        return names(membership.roles)

    def create(self, request: HttpRequest, form: ServiceForm) -> Membership:
        return services.create_membership(form.cleaned_data["workspace"], **form.values(), actor=request.user)

    def update(self, request: HttpRequest, current: Membership, form: ServiceForm) -> Membership:
        return services.update_membership(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: Membership) -> None:
        services.delete_membership(obj, actor=request.user)
