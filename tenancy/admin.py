"""Admin for workspaces and projects, through `tenancy.services`. Creating a workspace is registered by
`rbac/admin.py` (the owner set-up is RBAC's business), which also adds the roles to a workspace's page."""

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from iam.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceAdmin, ServiceForm, changed

from . import services
from .models import Project, Workspace
from .serializers import ProjectCreateRequest, ProjectUpdateRequest, WorkspaceUpdateRequest

SCHEMA = {"schema_version": "1"}


class WorkspaceForm(ServiceForm):
    update_request = WorkspaceUpdateRequest  # created by rbac/admin.py's form
    request_fields = services.WORKSPACE_FIELDS

    class Meta:
        model = Workspace
        fields = ("name", "slug", "description", "config", "tags", "meta")


class ProjectForm(ServiceForm):
    create_request = ProjectCreateRequest
    update_request = ProjectUpdateRequest
    request_fields = services.PROJECT_FIELDS
    renamed_on_update = {"code": "new_code"}

    class Meta:
        model = Project
        fields = ("workspace", "name", "code", "description", "config", "tags", "meta")


class ProjectInline(ReadOnlyInline):
    model = Project
    fields = ("name", "code", "created_at")
    readonly_fields = fields


class WorkspaceAdmin(ServiceAdmin):
    """Registered by rbac/admin.py, which adds creation and the roles inline."""

    form = WorkspaceForm
    list_display = ("slug", "name", "created_at", "id")
    search_fields = ("name", "slug", "=id")
    ordering = ("slug",)
    fields = ("id", "name", "slug", "description", "config", "tags", "meta", "created_at", "updated_at")
    readonly_fields = RESOURCE_READONLY
    inlines: tuple = (ProjectInline,)
    json_initial = {"config": SCHEMA, "meta": SCHEMA}

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        # The slug names the workspace in X-Workspace headers; the API does not change it either.
        return self.readonly_fields if obj is None else (*self.readonly_fields, "slug")

    def update(self, request: HttpRequest, current: Workspace, form: forms.ModelForm) -> Workspace:
        return services.update_workspace(
            current, **changed(form, services.WORKSPACE_FIELDS), actor=request.user
        )

    def remove(self, request: HttpRequest, obj: Workspace) -> None:
        services.delete_workspace(obj, actor=request.user)


@admin.register(Project)
class ProjectAdmin(ServiceAdmin):
    form = ProjectForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    list_filter = ("workspace",)
    search_fields = ("name", "code", "=id", "workspace__slug")
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    raw_id_fields = ("workspace",)
    fields = (
        "id",
        "workspace",
        "name",
        "code",
        "description",
        "config",
        "tags",
        "meta",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = (*RESOURCE_READONLY, "created_by")
    json_initial = {"config": SCHEMA, "meta": SCHEMA}

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.readonly_fields if obj is None else (*self.readonly_fields, "workspace")

    def create(self, request: HttpRequest, form: forms.ModelForm) -> Project:
        data = form.cleaned_data
        return services.create_project(
            data["workspace"],
            name=data["name"],
            code=data["code"] or None,
            description=data["description"],
            config=data["config"],
            tags=data["tags"],
            meta=data["meta"],
            actor=request.user,
        )

    def update(self, request: HttpRequest, current: Project, form: forms.ModelForm) -> Project:
        changes = changed(form, services.PROJECT_FIELDS)
        if "code" in changes:
            changes["new_code"] = changes.pop("code") or None
        return services.update_project(current, **changes, actor=request.user)

    def remove(self, request: HttpRequest, obj: Project) -> None:
        services.delete_project(obj, actor=request.user)
