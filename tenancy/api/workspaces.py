"""`workspace/create|describe|list|update|delete`. A new workspace's owner set-up
(its `*` permission, `owner` role and the creator's membership) writes rbac's models, so it is
`rbac.services.workspaces.create_workspace`: the HTTP tier may call any app's services."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of
from rbac import policy
from rbac.api.access import get_object, named_by
from rbac.models import Membership
from rbac.services.workspaces import create_workspace

from .. import serializers, services
from ..models import Workspace

# Workspaces are global: their endpoints take no X-Workspace header. describe, update and delete need
# `workspaces:<action>` in the workspace itself or in the root workspace, decided once the workspace is
# found (`decided_on_object`); to a caller who is not a member, another workspace does not exist
# (`policy.reaches`).


def workspace_named(request: Request, data: dict, *, permission: str) -> Workspace:
    """The workspace the body names by `id` and/or `slug`, once the caller may act on it."""
    return get_object(request, Workspace.objects.all(), permission=permission, **named_by(data, "id", "slug"))


class WorkspaceCreate(Endpoint):
    """Any enabled account may create a workspace; it becomes its owner. `mfa_required` (default false):
    see `workspace/update`; creating it on needs a session that used two factors (else 403 `use a second
    factor in this session before requiring one`). `branding` (optional, default `{}`): `display_name`,
    `logo_url` (https) and `primary_color` (`#rrggbb`), each optional, shown on the hosted pages shown for
    this workspace (its invitations, its applications' sign-in)."""

    summary = "Create a workspace"
    example_request = {
        "name": "Acme Corp",
        "slug": "acme",
        "description": "Acme's tenant",
        "config": {"schema_version": "1"},
        "branding": {
            "display_name": "Acme",
            "logo_url": "https://acme.example/logo.png",
            "primary_color": "#1a6fd0",
        },
        "tags": ["customer"],
        "meta": {"schema_version": "1"},
    }

    permission = None
    request_serializer = serializers.WorkspaceCreateRequest
    response_serializer = serializers.WorkspaceSerializer

    def handle(self, request: Request, data: dict) -> dict:
        policy.require_mfa_to_require(request.user, request.auth, None, mfa_required=data.get("mfa_required"))
        return self.serialize(create_workspace(owner=request.user, actor=request.user, **data))


class WorkspaceDescribe(Endpoint):
    """A workspace by `id` or `slug` (no `X-Workspace` header): needs `workspaces:describe` in that
    workspace or in the root workspace. To a caller who is not a member it is 404 `workspace not found`."""

    summary = "Describe a workspace"
    example_request = {"slug": "acme"}

    permission = "workspaces:describe"
    decided_on_object = True
    read_only = True
    request_serializer = serializers.WorkspaceRef
    response_serializer = serializers.WorkspaceSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(workspace_named(request, data, permission=self.permission))


class WorkspaceList(ListEndpoint):
    """The caller's workspaces; every workspace for holders of `workspaces:list` in the root workspace
    (while the root workspace requires MFA, only with a session that meets it). A workspace that requires
    MFA (`mfa_required`) is listed only to a session that meets its policy: one that used two factors,
    or came through one of that workspace's own SSO connections."""

    summary = "List the caller's workspaces"
    example_request = {"filter": {"tags": ["customer"]}, "options": {"limit": 20}}

    permission = None
    list_key = "workspaces"
    response_serializer = serializers.WorkspaceSerializer
    filter_fields = {name: name for name in ("id", "name", "slug", "description", "mfa_required")}

    def get_queryset(self, request: Request) -> QuerySet:
        if policy.has_global_permission(request.user, "workspaces:list", claims=request.auth):
            workspaces = Workspace.objects.all()
        else:
            mine = Membership.objects.filter(account=request.user, status=Membership.Status.ACTIVE)
            workspaces = Workspace.objects.filter(pk__in=mine.values("workspace_id"))
        return policy.without_unmet_mfa(workspaces, request.auth)


class WorkspaceUpdate(Endpoint):
    """Changes a workspace named by `id` or `slug`: needs `workspaces:update` in that workspace or in the
    root workspace. The slug names the workspace in `X-Workspace` headers and does not change.
    `mfa_required: true`: every call naming the workspace (`X-Workspace`, or `workspace/*` on it) then
    needs a session that used two factors or came through one of the workspace's own SSO connections,
    else 403 `mfa required by this workspace` (operators too; after the membership check), and
    `clients/validate` of its clients answers `reason: "mfa_required"`. Turning it on needs a session
    that meets it already (else 403 `use a second factor in this session before requiring one`), so
    nobody locks themselves out; operators are exempt. `branding` replaces the stored one (`{}` clears it)."""

    summary = "Change a workspace"
    example_request = {"slug": "acme", "name": "Acme Corporation", "tags": ["customer", "enterprise"]}

    permission = "workspaces:update"
    decided_on_object = True
    request_serializer = serializers.WorkspaceUpdateRequest
    response_serializer = serializers.WorkspaceSerializer

    def handle(self, request: Request, data: dict) -> dict:
        workspace = workspace_named(request, data, permission=self.permission)
        policy.require_mfa_to_require(
            request.user, request.auth, workspace, mfa_required=data.get("mfa_required")
        )
        changes = changes_of(data, "id", "slug")
        return self.serialize(services.update_workspace(workspace, **changes, actor=request.user))


class WorkspaceDelete(Endpoint):
    """Deletes a workspace with its projects, roles, permissions, memberships, credentials and clients: needs
    `workspaces:delete` in that workspace or in the root workspace, which itself cannot be deleted."""

    summary = "Delete a workspace"
    example_request = {"slug": "acme"}

    permission = "workspaces:delete"
    decided_on_object = True
    request_serializer = serializers.WorkspaceRef
    response_serializer = serializers.WorkspaceDeleted

    def handle(self, request: Request, data: dict) -> dict:
        workspace = workspace_named(request, data, permission=self.permission)
        return services.delete_workspace(workspace, actor=request.user)
