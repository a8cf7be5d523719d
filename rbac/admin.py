"""Admin for permissions, roles and memberships, through `rbac.services`: a role's permissions or a
membership's roles changed here purge the workspace's cached grants and record the push event, exactly as
over the API. Also registers workspaces (`tenancy/admin.py`), adding what needs RBAC: the owner set-up of
a new workspace and its roles on its page."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from iam.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceAdmin, ServiceForm, changed
from tenancy.admin import SCHEMA, WorkspaceAdmin
from tenancy.models import Workspace
from tenancy.serializers import WorkspaceCreateRequest

from . import services
from .models import Membership, Permission, Role
from .serializers import (
    MembershipCreateRequest,
    MembershipUpdateRequest,
    PermissionCreateRequest,
    PermissionUpdateRequest,
    RoleCreateRequest,
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
    request_fields = ("name", "slug", "description", "config", "tags", "meta")

    class Meta:
        model = Workspace
        fields = ("name", "slug", "description", "config", "tags", "meta")


class RoleInline(ReadOnlyInline):
    model = Role
    fields = ("name", "description", "created_at")
    readonly_fields = fields


class PermissionInline(ReadOnlyInline):
    model = Permission
    fields = ("name", "code", "description", "created_at")
    readonly_fields = fields


class RbacWorkspaceAdmin(WorkspaceAdmin):
    inlines = (*WorkspaceAdmin.inlines, RoleInline, PermissionInline)

    def get_form(self, request: HttpRequest, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = WorkspaceCreationForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_inlines(self, request: HttpRequest, obj=None):
        return () if obj is None else self.inlines

    def create(self, request: HttpRequest, form: forms.ModelForm) -> Workspace:
        data = form.cleaned_data
        return services.create_workspace(
            name=data["name"],
            slug=data["slug"],
            description=data["description"],
            config=data["config"],
            tags=data["tags"],
            meta=data["meta"],
            owner=request.user,  # CONTRACT 4: the creator becomes the owner
        )


admin.site.register(Workspace, RbacWorkspaceAdmin)


class PermissionForm(ServiceForm):
    create_request = PermissionCreateRequest
    update_request = PermissionUpdateRequest
    request_fields = services.PERMISSION_FIELDS

    class Meta:
        model = Permission
        fields = ("workspace", "name", "code", "description", "tags", "meta")


@admin.register(Permission)
class PermissionAdmin(ServiceAdmin):
    form = PermissionForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    list_filter = ("workspace",)
    search_fields = ("name", "code", "=id", "workspace__slug")
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    raw_id_fields = ("workspace",)
    fields = ("id", "workspace", "name", "code", "description", "tags", "meta", "created_at", "updated_at")
    readonly_fields = RESOURCE_READONLY
    json_initial = {"meta": SCHEMA}

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.readonly_fields if obj is None else (*self.readonly_fields, "workspace")

    def create(self, request: HttpRequest, form: forms.ModelForm) -> Permission:
        data = form.cleaned_data
        return services.create_permission(
            data["workspace"],
            name=data["name"],
            code=data["code"] or None,
            description=data["description"],
            tags=data["tags"],
            meta=data["meta"],
            actor=request.user,
        )

    def update(self, request: HttpRequest, current: Permission, form: forms.ModelForm) -> Permission:
        return services.update_permission(
            current, **changed(form, services.PERMISSION_FIELDS), actor=request.user
        )

    def remove(self, request: HttpRequest, obj: Permission) -> None:
        services.delete_permission(obj, actor=request.user)


class RoleForm(ServiceForm):
    create_request = RoleCreateRequest
    update_request = RoleUpdateRequest
    request_fields = services.ROLE_FIELDS

    permissions = InWorkspaceChoices(
        queryset=Permission.objects.all(),
        required=False,
        widget=admin.widgets.FilteredSelectMultiple("permissions", is_stacked=False),
    )

    class Meta:
        model = Role
        fields = ("workspace", "name", "description", "permissions", "tags", "meta")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        scope_choices(self, "permissions", saved_workspace(self))

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        workspace = cleaned.get("workspace") or saved_workspace(self)
        if workspace is not None and outside(workspace, cleaned.get("permissions") or []):
            self.add_error("permissions", "permission_ids must name permissions of this workspace")

    def request_data(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        data = super().request_data(cleaned)
        if self.adding:
            data["permission_ids"] = [str(permission.pk) for permission in cleaned.get("permissions") or []]
        return data


@admin.register(Role)
class RoleAdmin(ServiceAdmin):
    form = RoleForm
    list_display = ("name", "workspace", "permission_names", "created_at", "id")
    list_filter = ("workspace",)
    search_fields = ("name", "=id", "workspace__slug")
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    raw_id_fields = ("workspace",)
    fields = (
        "id",
        "workspace",
        "name",
        "description",
        "permissions",
        "tags",
        "meta",
        "created_at",
        "updated_at",
    )
    readonly_fields = RESOURCE_READONLY
    json_initial = {"meta": SCHEMA}

    @admin.display(description="permissions")
    def permission_names(self, role: Role) -> str:
        return ", ".join(sorted(permission.name for permission in role.permissions.all()))

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("permissions")

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.readonly_fields if obj is None else (*self.readonly_fields, "workspace")

    def create(self, request: HttpRequest, form: forms.ModelForm) -> Role:
        data = form.cleaned_data
        return services.create_role(
            data["workspace"],
            name=data["name"],
            description=data["description"],
            permissions=list(data["permissions"]),
            tags=data["tags"],
            meta=data["meta"],
            actor=request.user,
        )

    def update(self, request: HttpRequest, current: Role, form: forms.ModelForm) -> Role:
        permissions = list(form.cleaned_data["permissions"]) if "permissions" in form.changed_data else None
        return services.update_role(
            current, **changed(form, services.ROLE_FIELDS), permissions=permissions, actor=request.user
        )

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

    class Meta:
        model = Membership
        fields = ("account", "workspace", "project", "scope", "status", "roles", "tags", "meta")

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

    def request_data(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        """The scope, status and project as they stand (the update request checks them together)."""
        data = {
            name: cleaned[name]
            for name in ("scope", "status", "tags", "meta")
            if cleaned.get(name) is not None
        }
        project = cleaned.get("project")
        if project is not None:
            data["project_id"] = str(project.pk)
        if self.adding:
            account = cleaned.get("account")
            data.update(
                account_id=str(account.pk) if account else "",
                role_ids=[str(role.pk) for role in cleaned.get("roles") or []],
            )
        return data


@admin.register(Membership)
class MembershipAdmin(ServiceAdmin):
    form = MembershipForm
    list_display = ("account", "workspace", "project", "scope", "status", "role_names", "created_at")
    list_filter = ("status", "scope", "workspace")
    search_fields = ("account__email", "account__name", "workspace__slug", "=id")
    list_select_related = ("account", "workspace", "project")
    ordering = ("workspace__slug", "account__email")
    raw_id_fields = ("account", "workspace", "project")
    fields = (
        "id",
        "account",
        "workspace",
        "project",
        "scope",
        "status",
        "roles",
        "tags",
        "meta",
        "created_at",
        "updated_at",
    )
    readonly_fields = RESOURCE_READONLY
    json_initial = {"meta": SCHEMA}

    @admin.display(description="roles")
    def role_names(self, membership: Membership) -> str:
        return ", ".join(sorted(role.name for role in membership.roles.all()))

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("roles")

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        if obj is None:
            return self.readonly_fields
        return (*self.readonly_fields, "account", "workspace")

    def create(self, request: HttpRequest, form: forms.ModelForm) -> Membership:
        data = form.cleaned_data
        return services.create_membership(
            data["workspace"],
            account=data["account"],
            scope=data["scope"],
            status=data["status"],
            project=data["project"],
            roles=list(data["roles"]),
            tags=data["tags"],
            meta=data["meta"],
            actor=request.user,
        )

    def update(self, request: HttpRequest, current: Membership, form: forms.ModelForm) -> Membership:
        roles = list(form.cleaned_data["roles"]) if "roles" in form.changed_data else None
        return services.update_membership(
            current,
            **changed(form, services.MEMBERSHIP_FIELDS),
            roles=roles,
            actor=request.user,
        )

    def remove(self, request: HttpRequest, obj: Membership) -> None:
        services.delete_membership(obj, actor=request.user)
