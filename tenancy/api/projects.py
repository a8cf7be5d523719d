"""`projects/create|describe|list|update|delete`."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of
from rbac.api.access import get_object, in_visible_projects, named_by

from .. import serializers, services
from ..models import Project

# Projects: named by `id` or `code` (both must match when both are given); a project-scope grant
# reaches its own project (`project_scoped = True` admits it; `get_object(..., project_scoped=True)`
# checks the project once loaded).


def project_named(request: Request, data: dict, *, permission: str) -> Project:
    """The project of the `X-Workspace` workspace the body names, once the caller may act on it there."""
    return get_object(
        request,
        Project.objects.in_workspace(request.workspace),
        permission=permission,
        project_scoped=True,
        **named_by(data, "id", "code"),
    )


class ProjectCreate(Endpoint):
    """A new project of the `X-Workspace` workspace: needs `projects:create` workspace-wide (a
    project-scope grant cannot make a new project)."""

    summary = "Create a project"
    example_request = {
        "name": "Billing",
        "code": "billing",
        "description": "Invoices and payments",
        "config": {"schema_version": "1", "currency": "EUR"},
        "tags": ["finance"],
        "meta": {"schema_version": "1"},
    }

    permission = "projects:create"
    workspace_scoped = True
    request_serializer = serializers.ProjectCreateRequest
    response_serializer = serializers.ProjectSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(services.create_project(request.workspace, **data, actor=request.user))


class ProjectDescribe(Endpoint):
    """A project of the `X-Workspace` workspace by `id` or `code`; a project-scope grant reaches its own
    project only."""

    summary = "Describe a project"
    example_request = {"code": "billing"}

    permission = "projects:describe"
    workspace_scoped = True
    project_scoped = True
    read_only = True
    request_serializer = serializers.ProjectRef
    response_serializer = serializers.ProjectSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(project_named(request, data, permission=self.permission))


class ProjectList(ListEndpoint):
    """The projects of the `X-Workspace` workspace; a caller whose grant is project-scope sees its own
    projects only."""

    summary = "List the workspace's projects"
    example_request = {"filter": {"tags": ["finance"]}, "options": {"limit": 20, "order_bys": "name"}}

    permission = "projects:list"
    workspace_scoped = True
    project_scoped = True
    list_key = "projects"
    response_serializer = serializers.ProjectSerializer
    filter_fields = {
        name: name for name in ("id", "workspace_id", "name", "code", "description", "created_by")
    }

    def get_queryset(self, request: Request) -> QuerySet:
        projects = Project.objects.in_workspace(request.workspace)
        return in_visible_projects(request, projects, permission=self.permission, project_field="pk")


class ProjectUpdate(Endpoint):
    """Changes a project named by `id` or `code`; `new_code` gives it a new code. A project-scope grant of
    `projects:update` reaches its own project only."""

    summary = "Change a project"
    example_request = {"code": "billing", "name": "Billing and invoicing", "new_code": "invoicing"}

    permission = "projects:update"
    workspace_scoped = True
    project_scoped = True
    request_serializer = serializers.ProjectUpdateRequest
    response_serializer = serializers.ProjectSerializer

    def handle(self, request: Request, data: dict) -> dict:
        project = project_named(request, data, permission=self.permission)
        changes = changes_of(data, "id", "code")
        return self.serialize(services.update_project(project, **changes, actor=request.user))


class ProjectDelete(Endpoint):
    """Deletes a project named by `id` or `code` with its project-scope memberships; answers
    its `id`, `name` and `code`."""

    summary = "Delete a project"
    example_request = {"code": "billing"}

    permission = "projects:delete"
    workspace_scoped = True
    project_scoped = True
    request_serializer = serializers.ProjectRef
    response_serializer = serializers.ProjectDeleted

    def handle(self, request: Request, data: dict) -> dict:
        project = project_named(request, data, permission=self.permission)
        return services.delete_project(project, actor=request.user)
