"""The workspace and project endpoints. Tenancy owns the models and their services; the endpoints live
here because who may reach a workspace or a project, and the owner role a new workspace gets, are rbac's
rules."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.api import Endpoint, ListEndpoint, find_one
from iam.errors import ApiError
from tenancy import services
from tenancy.models import Project, Workspace
from tenancy.serializers import (
    ProjectCreateRequest,
    ProjectDeleted,
    ProjectRef,
    ProjectSerializer,
    ProjectUpdateRequest,
    WorkspaceCreateRequest,
    WorkspaceDeleted,
    WorkspaceRef,
    WorkspaceSerializer,
    WorkspaceUpdateRequest,
)

from . import policy
from .endpoints import ProjectScoped
from .models import Membership
from .services import create_workspace

# Workspaces are global: their endpoints take no X-Workspace header (CONTRACT 2).


class WorkspaceEndpoint(Endpoint):
    """describe/update/delete need `workspaces:<action>` in the workspace itself or in the root workspace
    (CONTRACT 4). To a caller who is not a member, another workspace does not exist."""

    action: str
    response_serializer = WorkspaceSerializer

    def get_workspace(self, request: Request, data: dict) -> Workspace:
        workspace = find_one(Workspace.objects.all(), data, ("id", "slug"))
        permission = f"workspaces:{self.action}"
        if policy.has_permission(request.user, workspace, permission) or policy.has_global_permission(
            request.user, permission
        ):
            return workspace
        if policy.grants(request.user.pk, workspace.pk).member:
            raise ApiError(403, f"missing permission {permission}")
        raise ApiError(404, "workspace not found")


class WorkspaceCreate(Endpoint):
    """Any enabled account may create a workspace; it becomes its owner."""

    request_serializer = WorkspaceCreateRequest
    response_serializer = WorkspaceSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(create_workspace(owner=request.user, **data))


class WorkspaceDescribe(WorkspaceEndpoint):
    read_only = True
    action = "describe"
    request_serializer = WorkspaceRef

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(self.get_workspace(request, data))


class WorkspaceList(ListEndpoint):
    """The caller's workspaces; every workspace for holders of `workspaces:list` in the root workspace."""

    list_key = "workspaces"
    response_serializer = WorkspaceSerializer
    filter_fields = {name: name for name in ("id", "name", "slug", "description")}

    def get_queryset(self, request: Request) -> QuerySet:
        if policy.has_global_permission(request.user, "workspaces:list"):
            return Workspace.objects.all()
        mine = Membership.objects.filter(account=request.user, status=Membership.Status.ACTIVE)
        return Workspace.objects.filter(pk__in=mine.values("workspace_id"))


class WorkspaceUpdate(WorkspaceEndpoint):
    action = "update"
    request_serializer = WorkspaceUpdateRequest

    def handle(self, request: Request, data: dict) -> dict:
        workspace = self.get_workspace(request, data)
        return self.serialize(services.update_workspace(workspace, changes=data, actor=request.user))


class WorkspaceDelete(WorkspaceEndpoint):
    action = "delete"
    request_serializer = WorkspaceRef
    response_serializer = WorkspaceDeleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.delete_workspace(self.get_workspace(request, data), actor=request.user)


# Projects


class ProjectEndpoint(ProjectScoped, Endpoint):
    workspace_scoped = True
    response_serializer = ProjectSerializer

    def get_project(self, request: Request, data: dict) -> Project:
        project = find_one(Project.objects.in_workspace(request.workspace), data, ("id", "code"))
        self.check_project(request, project.pk)
        return project


class ProjectCreate(ProjectEndpoint):
    permission = "projects:create"
    project_aware = False  # a project-scope grant cannot make a new project
    request_serializer = ProjectCreateRequest

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(services.create_project(request.workspace, actor=request.user, **data))


class ProjectDescribe(ProjectEndpoint):
    read_only = True
    permission = "projects:describe"
    request_serializer = ProjectRef

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(self.get_project(request, data))


class ProjectList(ProjectScoped, ListEndpoint):
    permission = "projects:list"
    workspace_scoped = True
    list_key = "projects"
    response_serializer = ProjectSerializer
    filter_fields = {
        "id": "id",
        "workspace_id": "workspace_id",
        "name": "name",
        "code": "code",
        "description": "description",
        "created_by": "created_by",
    }

    def get_queryset(self, request: Request) -> QuerySet:
        projects = Project.objects.in_workspace(request.workspace)
        visible = self.visible_projects(request)
        return projects if visible is None else projects.filter(pk__in=visible)


class ProjectUpdate(ProjectEndpoint):
    permission = "projects:update"
    request_serializer = ProjectUpdateRequest

    def handle(self, request: Request, data: dict) -> dict:
        project = self.get_project(request, data)
        changes = {key: value for key, value in data.items() if key not in ("id", "code")}
        return self.serialize(services.update_project(project, changes=changes, actor=request.user))


class ProjectDelete(ProjectEndpoint):
    permission = "projects:delete"
    request_serializer = ProjectRef
    response_serializer = ProjectDeleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.delete_project(self.get_project(request, data), actor=request.user)
