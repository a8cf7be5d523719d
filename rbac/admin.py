"""Admin for permissions, roles and memberships, through `rbac.services`: a role's permissions or a
membership's roles changed here purge the workspace's cached grants and record the push event, exactly as
over the API. Also registers workspaces (`tenancy/admin.py`), adding what needs RBAC: the owner set-up of
a new workspace and its roles on its page."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from iam.admin import REQUEST_KEYS, RESOURCE_READONLY, ReadOnlyInline, ServiceForm, api_fields
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
    """A role's permissions, a membership's roles: picked in a two-list widget, each labelled with its
    workspace (names repeat across workspaces)."""

    def __init__(self, model: type[Permission | Role]):
        plural = str(model._meta.verbose_name_plural)
        super().__init__(
            queryset=model.objects.select_related("workspace"),
            required=False,
            widget=admin.widgets.FilteredSelectMultiple(plural, is_stacked=False),
        )

    def label_from_instance(self, obj: Permission | Role) -> str:
        return f"{obj.workspace.slug}: {obj.name}"


class InWorkspaceForm(ServiceForm):
    """The form of a workspace's record whose relations must be of the same workspace (CONTRACT 6). On the
    change form the choice lists hold the workspace's own records; on the add form, where the workspace is
    chosen with them, `clean_relations` refuses another's, in the API's words."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.adding:
            for field in self.fields.values():
                if isinstance(field, InWorkspaceChoices):
                    field.queryset = field.queryset.filter(workspace=self.instance.workspace)

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        workspace = cleaned.get("workspace") or (None if self.adding else self.instance.workspace)
        if workspace is None:
            return
        for name, key in REQUEST_KEYS.items():
            value = cleaned.get(name)
            many = isinstance(value, QuerySet)
            records = list(value) if many else [] if value is None else [value]
            if any(getattr(record, "workspace_id", workspace.pk) != workspace.pk for record in records):
                noun = self.fields[name].queryset.model._meta
                what = noun.verbose_name_plural if many else f"a {noun.verbose_name}"
                self.add_error(name, f"{key} must name {what} of this workspace")


class WorkspaceCreationForm(ServiceForm):
    create_request = WorkspaceCreateRequest


class RoleInline(ReadOnlyInline):
    model = Role
    fields = ("name", "description", "created_at")


class PermissionInline(ReadOnlyInline):
    model = Permission
    fields = ("name", "code", "description", "created_at")


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
    create_service = staticmethod(services.create_permission)
    update_service = staticmethod(services.update_permission)
    delete_service = staticmethod(services.delete_permission)


def names(related) -> str:
    """A role's permissions, a membership's roles, in one cell."""
    return ", ".join(sorted(record.name for record in related.all()))


class RoleForm(InWorkspaceForm):
    create_request = RoleCreateRequest
    update_request = RoleUpdateRequest
    permissions = InWorkspaceChoices(Permission)


@admin.register(Role)
class RoleAdmin(InWorkspaceAdmin):
    form = RoleForm
    list_display = ("name", "workspace", "permission_names", "created_at", "id")
    search_fields = ("name", "=id", "workspace__slug")
    fields = api_fields(RoleSerializer)
    prefetched = ("permissions",)

    create_service = staticmethod(services.create_role)
    update_service = staticmethod(services.update_role)
    delete_service = staticmethod(services.delete_role)

    @admin.display(description="permissions")
    def permission_names(self, role: Role) -> str:
        return names(role.permissions)


class MembershipForm(InWorkspaceForm):
    create_request = MembershipCreateRequest
    update_request = MembershipUpdateRequest
    roles = InWorkspaceChoices(Role)


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

    create_service = staticmethod(services.create_membership)
    update_service = staticmethod(services.update_membership)
    delete_service = staticmethod(services.delete_membership)

    @admin.display(description="roles")
    def role_names(self, membership: Membership) -> str:
        return names(membership.roles)
