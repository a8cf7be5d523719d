"""The workspace and project endpoints. Tenancy owns the models and their services; the endpoints live
here because who may reach a workspace or a project, and the owner role a new workspace gets, are rbac's
rules."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.api import Endpoint
from iam.list_endpoint import ListEndpoint
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
from .api import ProjectScopedList, RecordEndpoint
from .models import Membership
from .services import create_workspace

# Workspaces are global: their endpoints take no X-Workspace header (CONTRACT 2).


class WorkspaceEndpoint(RecordEndpoint):
    """describe/update/delete need `workspaces:<action>` in the workspace itself or in the root workspace
    (CONTRACT 4). To a caller who is not a member, another workspace does not exist
    (`policy.require_in_workspace`)."""

    per_record = True
    lookup = ("id", "slug")
    request_serializer = WorkspaceRef
    response_serializer = WorkspaceSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Workspace.objects.all()


class WorkspaceCreate(Endpoint, route="workspace/create"):
    """Any enabled account may create a workspace; it becomes its owner."""

    request_serializer = WorkspaceCreateRequest
    response_serializer = WorkspaceSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(create_workspace(owner=request.user, **data))


class WorkspaceDescribe(WorkspaceEndpoint, route="workspace/describe"):
    read_only = True
    permission = "workspaces:describe"


class WorkspaceList(ListEndpoint, route="workspace/list"):
    """The caller's workspaces; every workspace for holders of `workspaces:list` in the root workspace."""

    list_key = "workspaces"
    response_serializer = WorkspaceSerializer
    filter_fields = {name: name for name in ("id", "name", "slug", "description")}

    def get_queryset(self, request: Request) -> QuerySet:
        if policy.has_global_permission(request.user, "workspaces:list"):
            return Workspace.objects.all()
        mine = Membership.objects.filter(account=request.user, status=Membership.Status.ACTIVE)
        return Workspace.objects.filter(pk__in=mine.values("workspace_id"))


class WorkspaceUpdate(WorkspaceEndpoint, route="workspace/update"):
    permission = "workspaces:update"
    request_serializer = WorkspaceUpdateRequest
    service = services.update_workspace


class WorkspaceDelete(WorkspaceEndpoint, route="workspace/delete"):
    permission = "workspaces:delete"
    response_serializer = WorkspaceDeleted
    service = services.delete_workspace


# Projects


class ProjectEndpoint(RecordEndpoint):
    workspace_scoped = True
    project_aware = True
    lookup = ("id", "code")
    request_serializer = ProjectRef
    response_serializer = ProjectSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Project.objects.in_workspace(request.workspace)


class ProjectCreate(ProjectEndpoint, route="projects/create"):
    permission = "projects:create"
    project_aware = False  # a project-scope grant cannot make a new project
    creates = True
    request_serializer = ProjectCreateRequest
    service = services.create_project


class ProjectDescribe(ProjectEndpoint, route="projects/describe"):
    read_only = True
    permission = "projects:describe"


class ProjectList(ProjectScopedList, route="projects/list"):
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


class ProjectUpdate(ProjectEndpoint, route="projects/update"):
    permission = "projects:update"
    request_serializer = ProjectUpdateRequest
    service = services.update_project


class ProjectDelete(ProjectEndpoint, route="projects/delete"):
    permission = "projects:delete"
    response_serializer = ProjectDeleted
    service = services.delete_project
