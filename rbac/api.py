"""The RBAC endpoints: permissions, roles, memberships, invitations and `permissions/check`, listed by
path in rbac/urls.py. Each states on its class the permission it needs (`permission = "roles:update"`), its
workspace scoping, its serializers and an example request, and has a short `handle` that loads the object
the body names through the one policy (`rbac.policy.get_object`: what does not depend on the object is
refused first, then a 404, then the decision on the object), calls its service and answers."""

from django.db.models import QuerySet
from rest_framework.request import Request

from accounts.models import Account
from iam.api import EncodedJson, Endpoint, answer_fresh
from iam.errors import ApiError
from iam.list_endpoint import ListEndpoint
from iam.serializers import prefetch
from tenancy.models import Project

from . import policy, services
from .models import Invitation, Membership, Permission, Role
from .policy import get_object, in_visible_projects, named_by
from .serializers import (
    Deleted,
    IdRequest,
    InvitationCreateRequest,
    InvitationSerializer,
    MembershipCreateRequest,
    MembershipSerializer,
    MembershipUpdateRequest,
    PermissionCheckRequest,
    PermissionCheckResult,
    PermissionCreateRequest,
    PermissionRef,
    PermissionSerializer,
    PermissionUpdateRequest,
    RoleCreateRequest,
    RoleSerializer,
    RoleUpdateRequest,
)


def changes_of(data: dict, *identifiers: str) -> dict:
    """An update's fields: the validated body less the keys that name the object or its references."""
    return {key: value for key, value in data.items() if key not in identifiers}


# Permissions


def permissions_in(request: Request) -> QuerySet:
    """The permissions of the `X-Workspace` workspace."""
    return Permission.objects.in_workspace(request.workspace)


class PermissionCreate(Endpoint):
    """A new permission of the `X-Workspace` workspace: `name` is `*` or `resource:action`, either side `*` or
    letters, digits, `_`, `.` and `-` (at most 128 characters). The caller's own grants must cover the name:
    nobody grants what they do not hold (403 `cannot grant permissions you do not hold`)."""

    summary = "Create a permission"
    permission = "permissions:create"
    workspace_scoped = True
    request_serializer = PermissionCreateRequest
    response_serializer = PermissionSerializer
    example_request = {
        "name": "invoices:read",
        "code": "invoices:read",
        "description": "Read invoices",
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> dict:
        created = services.create_permission(request.workspace, **data, actor=request.user)
        return self.serialize(created)


class PermissionDescribe(Endpoint):
    """A permission of the `X-Workspace` workspace by `id` or `code`; one of another workspace is not
    found (404)."""

    summary = "Describe a permission"
    permission = "permissions:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = PermissionRef
    response_serializer = PermissionSerializer
    example_request = {"code": "invoices:read"}

    def handle(self, request: Request, data: dict) -> dict:
        found = get_object(
            request,
            permissions_in(request),
            permission=self.permission,
            **named_by(data, "id", "code"),  # both must match when both are given
        )
        return self.serialize(found)


class PermissionList(ListEndpoint):
    """The permissions of the `X-Workspace` workspace."""

    summary = "List the workspace's permissions"
    permission = "permissions:list"
    workspace_scoped = True
    list_key = "permissions"
    response_serializer = PermissionSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "code", "description")}
    example_request = {"filter": {"fields": {"name": "invoices:read"}}, "options": {"limit": 100}}

    def get_queryset(self, request: Request) -> QuerySet:
        return permissions_in(request)


class PermissionUpdate(Endpoint):
    """Changes a permission named by `id` (`code` is a change here). A new `name` must be covered by the
    caller's own grants; the roles holding the permission keep it."""

    summary = "Change a permission"
    permission = "permissions:update"
    workspace_scoped = True
    request_serializer = PermissionUpdateRequest
    response_serializer = PermissionSerializer
    example_request = {
        "id": "c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18",
        "description": "Read and export invoices",
    }

    def handle(self, request: Request, data: dict) -> dict:
        found = get_object(request, permissions_in(request), permission=self.permission, pk=data["id"])
        updated = services.update_permission(found, **changes_of(data, "id"), actor=request.user)
        return self.serialize(updated)


class PermissionDelete(Endpoint):
    """Deletes a permission named by `id`; the roles that held it lose it, and so do their holders, at
    once."""

    summary = "Delete a permission"
    permission = "permissions:delete"
    workspace_scoped = True
    request_serializer = IdRequest
    response_serializer = Deleted
    example_request = {"id": "c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18"}

    def handle(self, request: Request, data: dict) -> dict:
        found = get_object(request, permissions_in(request), permission=self.permission, pk=data["id"])
        return services.delete_permission(found, actor=request.user)


# Roles


def roles_with_permissions(request: Request) -> QuerySet:
    """The roles of the `X-Workspace` workspace, each with its permissions (a query each, whatever the
    count)."""
    return Role.objects.in_workspace(request.workspace).prefetch_related(prefetch("permissions"))


def permissions_named(request: Request, ids: list) -> list[Permission]:
    """The permissions of the `X-Workspace` workspace that `permission_ids` names (400 for any other)."""
    permissions = Permission.objects.in_workspace(request.workspace)
    return services.resolve(permissions, ids, field="permission_ids")


class RoleCreate(Endpoint):
    """A new role of the `X-Workspace` workspace holding `permission_ids`: permissions of this workspace, each
    covered by the caller's own grants (else 403 `cannot grant permissions you do not hold`)."""

    summary = "Create a role"
    permission = "roles:create"
    workspace_scoped = True
    request_serializer = RoleCreateRequest
    response_serializer = RoleSerializer
    example_request = {
        "name": "billing-reader",
        "description": "Reads invoices",
        "permission_ids": ["c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18"],
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        fields = changes_of(data, "permission_ids")
        permissions = permissions_named(request, data["permission_ids"])
        role = services.create_role(request.workspace, **fields, permissions=permissions, actor=request.user)
        return answer_fresh(request, RoleSerializer, roles_with_permissions(request), role)


class RoleDescribe(Endpoint):
    """A role of the `X-Workspace` workspace by `id`, with each of its permissions as a whole Permission
    object."""

    summary = "Describe a role"
    permission = "roles:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = IdRequest
    response_serializer = RoleSerializer
    example_request = {"id": "5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        role = get_object(
            request, Role.objects.in_workspace(request.workspace), permission=self.permission, pk=data["id"]
        )
        return answer_fresh(request, RoleSerializer, roles_with_permissions(request), role)


class RoleList(ListEndpoint):
    """The roles of the `X-Workspace` workspace, each with its permissions."""

    summary = "List the workspace's roles"
    permission = "roles:list"
    workspace_scoped = True
    list_key = "roles"
    response_serializer = RoleSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "description")}
    example_request = {"filter": {"fields": {"name": "billing-reader"}}, "options": {"limit": 100}}

    def get_queryset(self, request: Request) -> QuerySet:
        return roles_with_permissions(request)


class RoleUpdate(Endpoint):
    """Changes a role named by `id`; `permission_ids` replaces its permissions, each of this workspace and
    covered by the caller's own grants. Its holders' grants change at once."""

    summary = "Change a role"
    permission = "roles:update"
    workspace_scoped = True
    request_serializer = RoleUpdateRequest
    response_serializer = RoleSerializer
    example_request = {
        "id": "5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26",
        "permission_ids": ["c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18", "0a4c6e8b-2d1f-4b3a-9c5e-7d9f1b3a5c72"],
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        role = get_object(
            request, Role.objects.in_workspace(request.workspace), permission=self.permission, pk=data["id"]
        )
        changes = changes_of(data, "id", "permission_ids")
        if "permission_ids" in data:
            changes["permissions"] = permissions_named(request, data["permission_ids"])
        services.update_role(role, **changes, actor=request.user)
        return answer_fresh(request, RoleSerializer, roles_with_permissions(request), role)


class RoleDelete(Endpoint):
    """Deletes a role named by `id`; the memberships that held it lose it, and their accounts its
    permissions, at once."""

    summary = "Delete a role"
    permission = "roles:delete"
    workspace_scoped = True
    request_serializer = IdRequest
    response_serializer = Deleted
    example_request = {"id": "5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"}

    def handle(self, request: Request, data: dict) -> dict:
        role = get_object(
            request, Role.objects.in_workspace(request.workspace), permission=self.permission, pk=data["id"]
        )
        return services.delete_role(role, actor=request.user)


# Memberships


def project_named(request: Request, project_id) -> Project:
    """The project of the `X-Workspace` workspace that `project_id` names (400 for any other)."""
    project = Project.objects.in_workspace(request.workspace).filter(pk=project_id).first()
    if project is None:
        raise ApiError(400, "project_id must name a project of this workspace", "project_id")
    return project


def roles_named(request: Request, ids: list) -> list[Role]:
    """The roles of the `X-Workspace` workspace that `role_ids` names (400 for any other)."""
    return services.resolve(Role.objects.in_workspace(request.workspace), ids, field="role_ids")


def membership_place(request: Request, project_id, *, permission: str) -> Project | None:
    """Where a membership is created or moved to, held to `permission` as a membership already there would
    be: a project (400 unless of this workspace), where a project-scope grant of `permission` counts; or,
    for `None`, the workspace itself, which needs `permission` workspace-wide."""
    if project_id is None:
        policy.require(request.user, request.workspace, permission)
        return None
    project = project_named(request, project_id)
    policy.require(request.user, request.workspace, permission, project_id=project.pk)
    return project


def memberships_in(request: Request) -> QuerySet:
    """The memberships of the `X-Workspace` workspace."""
    return Membership.objects.in_workspace(request.workspace)


class MembershipCreate(Endpoint):
    """Adds an account to the `X-Workspace` workspace, workspace-wide or in one project, with `role_ids`:
    roles of this workspace, covered by the caller's own grants (else 403 `cannot grant permissions you do not
    hold`). For another account, unless the caller is an operator, the membership is `invited` whatever
    `status` says and the account is e-mailed a link to accept it (valid 7 days, once). A project-scope grant
    reaches its own project."""

    summary = "Add an account to the workspace"
    permission = "memberships:create"
    workspace_scoped = True
    project_scoped = True
    request_serializer = MembershipCreateRequest
    response_serializer = MembershipSerializer
    example_request = {
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "scope": "project",
        "status": "invited",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "tags": ["contractor"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        # The account, then the place, then the roles: each refusal before the next.
        account = Account.objects.filter(pk=data["account_id"]).first()
        if account is None:
            raise ApiError(400, "account_id must name an existing account", "account_id")
        project = membership_place(request, data.get("project_id"), permission=self.permission)
        roles = roles_named(request, data["role_ids"])
        membership = services.create_membership(
            request.workspace,
            **changes_of(data, "account_id", "project_id", "role_ids"),
            account=account,
            project=project,
            roles=roles,
            actor=request.user,
        )
        return answer_fresh(request, MembershipSerializer, memberships_in(request), membership)


class MembershipDescribe(Endpoint):
    """A membership of the `X-Workspace` workspace by `id`, with its roles; a project-scope grant of
    `memberships:describe` reaches the memberships of its own project."""

    summary = "Describe a membership"
    permission = "memberships:describe"
    workspace_scoped = True
    project_scoped = True
    read_only = True
    request_serializer = IdRequest
    response_serializer = MembershipSerializer
    example_request = {"id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        membership = get_object(
            request, memberships_in(request), permission=self.permission, project_scoped=True, pk=data["id"]
        )
        return answer_fresh(request, MembershipSerializer, memberships_in(request), membership)


class MembershipList(ListEndpoint):
    """The memberships of the `X-Workspace` workspace, each with its roles; a caller whose grant is
    project-scope sees those of its own projects."""

    summary = "List the workspace's memberships"
    permission = "memberships:list"
    workspace_scoped = True
    project_scoped = True
    list_key = "memberships"
    response_serializer = MembershipSerializer
    filter_fields = {
        name: name for name in ("id", "account_id", "workspace_id", "scope", "status", "project_id")
    }
    example_request = {
        "filter": {"fields": {"status": "active", "scope": "workspace"}},
        "options": {"limit": 100, "order_bys": ["!created_at"]},
    }

    def get_queryset(self, request: Request) -> QuerySet:
        return in_visible_projects(request, memberships_in(request), permission=self.permission)


class MembershipUpdate(Endpoint):
    """Changes a membership named by `id`: its scope and project, status, `role_ids` (replaces its roles; each
    must be covered by the caller's own grants) and meta. Only the invited account can make an invited
    membership `active` (else 403 `only the invited account can accept`); an accepted one may be suspended and
    reactivated."""

    summary = "Change a membership"
    permission = "memberships:update"
    workspace_scoped = True
    project_scoped = True
    request_serializer = MembershipUpdateRequest
    response_serializer = MembershipSerializer
    example_request = {
        "id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "status": "suspended",
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        membership = get_object(
            request, memberships_in(request), permission=self.permission, project_scoped=True, pk=data["id"]
        )
        # The place it moves to, then the roles: each refusal before the next.
        changes = changes_of(data, "id", "project_id", "role_ids")
        if "project_id" in data:
            changes["project"] = membership_place(request, data["project_id"], permission=self.permission)
        elif changes.get("scope") == Membership.Scope.WORKSPACE:
            membership_place(request, None, permission=self.permission)
        if "role_ids" in data:
            changes["roles"] = roles_named(request, data["role_ids"])
        services.update_membership(membership, **changes, actor=request.user)
        return answer_fresh(request, MembershipSerializer, memberships_in(request), membership)


class MembershipDelete(Endpoint):
    """Removes a membership named by `id`: the account loses its roles there at once. A project-scope
    grant reaches the memberships of its own project."""

    summary = "Remove a membership"
    permission = "memberships:delete"
    workspace_scoped = True
    project_scoped = True
    request_serializer = IdRequest
    response_serializer = Deleted
    example_request = {"id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64"}

    def handle(self, request: Request, data: dict) -> dict:
        membership = get_object(
            request, memberships_in(request), permission=self.permission, project_scoped=True, pk=data["id"]
        )
        return services.delete_membership(membership, actor=request.user)


# Invitations by e-mail (accept, decline and the invitee's own list: rbac/invitation_endpoints.py)


def invitations_in(request: Request) -> QuerySet:
    """The invitations of the `X-Workspace` workspace."""
    return Invitation.objects.in_workspace(request.workspace)


class InvitationCreate(Endpoint):
    """Invites an e-mail address to the `X-Workspace` workspace, workspace-wide or in one project
    (`project_id`), with `role_ids`: roles of this workspace, covered by the caller's own grants (nobody
    grants what it does not hold). The address is e-mailed a link to accept or decline, valid 7 days and
    usable once, whether or not an account holds it: the answer is the same either way. A pending
    invitation for the same address and place, or a member there already, is a conflict (409)."""

    summary = "Invite an e-mail address to the workspace"
    permission = "invitations:create"
    workspace_scoped = True
    request_serializer = InvitationCreateRequest
    response_serializer = InvitationSerializer
    example_request = {
        "email": "bob@example.com",
        "scope": "workspace",
        "role_ids": ["7a1d2c3b-4e5f-4a6b-8c9d-0e1f2a3b4c5d"],
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        project_id = data.get("project_id")
        project = None if project_id is None else project_named(request, project_id)
        roles = roles_named(request, data["role_ids"])
        invitation = services.create_invitation(
            request.workspace,
            **changes_of(data, "project_id", "role_ids"),
            project=project,
            roles=roles,
            actor=request.user,
        )
        return answer_fresh(request, InvitationSerializer, invitations_in(request), invitation)


class InvitationDescribe(Endpoint):
    """An invitation of the `X-Workspace` workspace by `id`; one of another workspace is not found."""

    summary = "Describe an invitation"
    permission = "invitations:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = IdRequest
    response_serializer = InvitationSerializer
    example_request = {"id": "3f0c6d2a-8b1e-4c5d-9a7f-2e6b1c4d8a90"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        invitation = get_object(request, invitations_in(request), permission=self.permission, pk=data["id"])
        return answer_fresh(request, InvitationSerializer, invitations_in(request), invitation)


class InvitationList(ListEndpoint):
    """The invitations of the `X-Workspace` workspace, each with its roles. `status` filters by what an
    invitation is now: `pending`, `accepted`, `declined`, `revoked` or `expired` (past `expires_at`)."""

    summary = "List the workspace's invitations"
    permission = "invitations:list"
    workspace_scoped = True
    list_key = "invitations"
    response_serializer = InvitationSerializer
    filter_fields = {name: name for name in ("id", "email", "status", "scope", "project_id")}
    example_request = {"filter": {"fields": {"status": "pending"}}, "options": {"limit": 100}}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        # `status` is not a column: what an invitation is now (`expired` is a pending one past its time).
        filters = dict(data.get("filter") or {})
        fields = dict(filters.get("fields") or {})
        self.status = fields.pop("status", None)
        if "status" in filters.get("fields", {}) and self.status not in Invitation.Status.values:
            raise ApiError(400, "invalid value for filter field: status", "status")
        return super().handle(request, {**data, "filter": {**filters, "fields": fields}})

    def get_queryset(self, request: Request) -> QuerySet:
        invitations = invitations_in(request)
        if self.status is None:
            return invitations
        return invitations.filter(services.invitations_in_status(self.status))


class InvitationRevoke(Endpoint):
    """Withdraws a pending invitation named by `id`: its link opens nothing from then on."""

    summary = "Withdraw an invitation"
    permission = "invitations:revoke"
    workspace_scoped = True
    request_serializer = IdRequest
    response_serializer = InvitationSerializer
    example_request = {"id": "3f0c6d2a-8b1e-4c5d-9a7f-2e6b1c4d8a90"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        invitation = get_object(request, invitations_in(request), permission=self.permission, pk=data["id"])
        services.revoke_invitation(invitation, actor=request.user)
        return answer_fresh(request, InvitationSerializer, invitations_in(request), invitation)


class PermissionCheck(Endpoint):
    """Why may (or may not) this account do this here? The decision `clients/validate` makes for the
    account in the `X-Workspace` workspace, with every grant path behind it (`rbac.policy.explain`)."""

    summary = "Explain whether an account holds a permission"
    permission = "permissions:check"
    workspace_scoped = True
    read_only = True
    request_serializer = PermissionCheckRequest
    response_serializer = PermissionCheckResult
    example_request = {
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "permission": "invoices:read",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
    }

    def handle(self, request: Request, data: dict) -> dict:
        account = Account.objects.filter(pk=data["account_id"]).first()
        if account is None:
            raise ApiError(400, "account_id must name an existing account", "account_id")
        project_id = data.get("project_id")
        if (
            project_id is not None
            and not Project.objects.in_workspace(request.workspace).filter(pk=project_id).exists()
        ):
            raise ApiError(400, "project_id must name a project of this workspace", "project_id")
        return policy.explain(account, request.workspace.pk, data["permission"], project_id=project_id)
