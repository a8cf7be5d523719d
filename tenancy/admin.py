"""Admin for workspaces and projects, through `tenancy.services`. Creating a workspace is registered by
`rbac/admin.py` (the owner set-up is RBAC's business), which also adds the roles to a workspace's page."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from iam.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceAdmin, ServiceForm, api_fields

from . import services
from .models import Project
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
    update_service = staticmethod(services.update_workspace)
    delete_service = staticmethod(services.delete_workspace)


class InWorkspaceAdmin(ServiceAdmin):
    """A record of one workspace: chosen by id on the add form, fixed after (the API never moves one).
    `create_service` takes the workspace, then the form's `values()` and the operator."""

    list_filter = ("workspace",)
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    raw_id_fields = ("workspace",)
    readonly_fields = RESOURCE_READONLY
    fixed_on_change = ("workspace",)
    json_initial = {"meta": SCHEMA}
    create_service: Callable[..., Any] | None = None

    def create(self, request: HttpRequest, form: ServiceForm) -> Any:
        assert self.create_service is not None, f"{type(self).__name__} creates nothing"
        return self.create_service(form.cleaned_data["workspace"], **form.values(), actor=request.user)


@admin.register(Project)
class ProjectAdmin(InWorkspaceAdmin):
    form = ProjectForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(ProjectSerializer)
    readonly_fields = (*RESOURCE_READONLY, "created_by")
    json_initial = {"config": SCHEMA, "meta": SCHEMA}
    create_service = staticmethod(services.create_project)
    update_service = staticmethod(services.update_project)
    delete_service = staticmethod(services.delete_project)
