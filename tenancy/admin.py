"""Admin for workspaces and projects, through `tenancy.services`. Creating a workspace is registered by
`rbac/admin.py` (the owner set-up is RBAC's business), which also adds the roles to a workspace's page."""

from django.contrib import admin
from django.http import HttpRequest

from iam.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceAdmin, ServiceForm, api_fields

from . import services
from .models import Project, Workspace
from .serializers import (
    ProjectCreateRequest,
    ProjectSerializer,
    ProjectUpdateRequest,
    WorkspaceSerializer,
    WorkspaceUpdateRequest,
)

SCHEMA = {"schema_version": "1"}


class WorkspaceForm(ServiceForm):
    update_request = WorkspaceUpdateRequest  # created by rbac/admin.py's form


class ProjectForm(ServiceForm):
    create_request = ProjectCreateRequest
    update_request = ProjectUpdateRequest
    renamed_on_update = {"code": "new_code"}


class ProjectInline(ReadOnlyInline):
    model = Project
    fields = ("name", "code", "created_at")


class WorkspaceAdmin(ServiceAdmin):
    """Registered by rbac/admin.py, which adds creation and the roles inline."""

    form = WorkspaceForm
    list_display = ("slug", "name", "created_at", "id")
    search_fields = ("name", "slug", "=id")
    ordering = ("slug",)
    fields = api_fields(WorkspaceSerializer)
    readonly_fields = RESOURCE_READONLY
    # The slug names the workspace in X-Workspace headers; the API does not change it either.
    fixed_on_change = ("slug",)
    inlines: tuple = (ProjectInline,)
    json_initial = {"config": SCHEMA, "meta": SCHEMA}

    def update(self, request: HttpRequest, current: Workspace, form: ServiceForm) -> Workspace:
        return services.update_workspace(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: Workspace) -> None:
        services.delete_workspace(obj, actor=request.user)


class InWorkspaceAdmin(ServiceAdmin):
    """A record of one workspace: chosen by id on the add form, fixed after (the API never moves one)."""

    list_filter = ("workspace",)
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    raw_id_fields = ("workspace",)
    readonly_fields = RESOURCE_READONLY
    fixed_on_change = ("workspace",)
    json_initial = {"meta": SCHEMA}


@admin.register(Project)
class ProjectAdmin(InWorkspaceAdmin):
    form = ProjectForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(ProjectSerializer)
    readonly_fields = (*RESOURCE_READONLY, "created_by")
    json_initial = {"config": SCHEMA, "meta": SCHEMA}

    def create(self, request: HttpRequest, form: ServiceForm) -> Project:
        return services.create_project(form.cleaned_data["workspace"], **form.values(), actor=request.user)

    def update(self, request: HttpRequest, current: Project, form: ServiceForm) -> Project:
        return services.update_project(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: Project) -> None:
        services.delete_project(obj, actor=request.user)
