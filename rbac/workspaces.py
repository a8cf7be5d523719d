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
    """A workspace, named by `id` or `slug`. describe/update/delete need `workspaces:<action>` in the
    workspace itself or in the root workspace (CONTRACT 4), decided on the record (`per_record`); to a
    caller who is not a member, another workspace does not exist (`policy.require_in_workspace`)."""

    model = Workspace
    per_record = True
    ref = WorkspaceRef
    response_serializer = WorkspaceSerializer


class WorkspaceCreate(Endpoint, route="workspace/create"):
    """Any enabled account may create a workspace; it becomes its owner. `mfa_required` (default false):
    see `workspace/update`."""

    example_request = {
        "name": "Acme Corp",
        "slug": "acme",
        "description": "Acme's tenant",
        "config": {"schema_version": "1"},
        "tags": ["customer"],
        "meta": {"schema_version": "1"},
    }

    request_serializer = WorkspaceCreateRequest
    response_serializer = WorkspaceSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(create_workspace(owner=request.user, actor=request.user, **data))


class WorkspaceDescribe(WorkspaceEndpoint, route="workspace/describe"):
    """A workspace by `id` or `slug` (no `X-Workspace` header): needs `workspaces:describe` in that
    workspace or in the root workspace. To a caller who is not a member it is 404 `workspace not found`."""

    example_request = {"slug": "acme"}

    read_only = True


class WorkspaceList(ListEndpoint, route="workspace/list"):
    """The caller's workspaces; every workspace for holders of `workspaces:list` in the root workspace.
    A workspace that requires MFA (`mfa_required`) is listed only to a session that meets its policy:
    one that used two factors, or came through one of that workspace's own SSO connections."""

    example_request = {"filter": {"tags": ["customer"]}, "options": {"limit": 20}}

    list_key = "workspaces"
    response_serializer = WorkspaceSerializer
    filter_fields = {name: name for name in ("id", "name", "slug", "description", "mfa_required")}

    def get_queryset(self, request: Request) -> QuerySet:
        if policy.has_global_permission(request.user, "workspaces:list"):
            workspaces = Workspace.objects.all()
        else:
            mine = Membership.objects.filter(account=request.user, status=Membership.Status.ACTIVE)
            workspaces = Workspace.objects.filter(pk__in=mine.values("workspace_id"))
        return policy.without_unmet_mfa(workspaces, request.auth)


class WorkspaceUpdate(WorkspaceEndpoint, route="workspace/update"):
    """Changes a workspace named by `id` or `slug`: needs `workspaces:update` in that workspace or in the
    root workspace. The slug names the workspace in `X-Workspace` headers and does not change.
    `mfa_required: true`: every call naming the workspace (`X-Workspace`, or `workspace/*` on it) then
    needs a session that used two factors or came through one of the workspace's own SSO connections,
    else 403 `mfa required by this workspace` (operators too; after the membership check), and
    `clients/validate` of its clients answers `reason: "mfa_required"`."""

    example_request = {"slug": "acme", "name": "Acme Corporation", "tags": ["customer", "enterprise"]}

    request_serializer = WorkspaceUpdateRequest
    service = services.update_workspace


class WorkspaceDelete(WorkspaceEndpoint, route="workspace/delete"):
    """Deletes a workspace with its projects, roles, permissions, memberships, credentials and clients: needs
    `workspaces:delete` in that workspace or in the root workspace, which itself cannot be deleted."""

    example_request = {"slug": "acme"}

    response_serializer = WorkspaceDeleted
    service = services.delete_workspace


# Projects


class ProjectEndpoint(RecordEndpoint):
    """A project, named by `id` or `code` (both must match when both are given); a project-scope grant
    reaches its own project."""

    model = Project
    project_aware = True
    ref = ProjectRef
    response_serializer = ProjectSerializer


class ProjectCreate(ProjectEndpoint, route="projects/create"):
    """A new project of the `X-Workspace` workspace: needs `projects:create` workspace-wide (a
    project-scope grant cannot make a new project)."""

    example_request = {
        "name": "Billing",
        "code": "billing",
        "description": "Invoices and payments",
        "config": {"schema_version": "1", "currency": "EUR"},
        "tags": ["finance"],
        "meta": {"schema_version": "1"},
    }

    project_aware = False  # a project-scope grant cannot make a new project
    creates = True
    request_serializer = ProjectCreateRequest
    service = services.create_project


class ProjectDescribe(ProjectEndpoint, route="projects/describe"):
    """A project of the `X-Workspace` workspace by `id` or `code`; a project-scope grant reaches its own
    project only."""

    example_request = {"code": "billing"}

    read_only = True


class ProjectList(ProjectScopedList, route="projects/list"):
    """The projects of the `X-Workspace` workspace; a caller whose grant is project-scope sees its own
    projects only."""

    example_request = {"filter": {"tags": ["finance"]}, "options": {"limit": 20, "order_bys": "name"}}

    model = Project
    project_field = "pk"
    list_key = "projects"
    response_serializer = ProjectSerializer
    filter_fields = {
        name: name for name in ("id", "workspace_id", "name", "code", "description", "created_by")
    }


class ProjectUpdate(ProjectEndpoint, route="projects/update"):
    """Changes a project named by `id` or `code`; `new_code` gives it a new code. A project-scope grant of
    `projects:update` reaches its own project only."""

    example_request = {"code": "billing", "name": "Billing and invoicing", "new_code": "invoicing"}

    request_serializer = ProjectUpdateRequest
    service = services.update_project


class ProjectDelete(ProjectEndpoint, route="projects/delete"):
    """Deletes a project named by `id` or `code` with its project-scope memberships; answers
    its `id`, `name` and `code`."""

    example_request = {"code": "billing"}

    response_serializer = ProjectDeleted
    service = services.delete_project
