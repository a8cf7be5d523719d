from django.db.models import QuerySet
from rest_framework.request import Request

from accounts.models import Account
from iam.api import Endpoint, find_one
from iam.errors import ApiError
from iam.list_endpoint import ListEndpoint
from tenancy.models import Project

from . import endpoints, policy, services
from .models import Membership, Permission, Role
from .serializers import (
    Deleted,
    IdRequest,
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

# Permissions


class PermissionEndpoint(endpoints.Endpoint):
    workspace_scoped = True
    lookup = ("id", "code")
    response_serializer = PermissionSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Permission.objects.in_workspace(request.workspace)


class PermissionCreate(PermissionEndpoint):
    permission = "permissions:create"
    request_serializer = PermissionCreateRequest

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(services.create_permission(request.workspace, actor=request.user, **data))


class PermissionDescribe(PermissionEndpoint):
    read_only = True
    permission = "permissions:describe"
    request_serializer = PermissionRef

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(self.get_object(request, data))


class PermissionList(ListEndpoint):
    permission = "permissions:list"
    workspace_scoped = True
    list_key = "permissions"
    response_serializer = PermissionSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "code", "description")}

    def get_queryset(self, request: Request) -> QuerySet:
        return Permission.objects.in_workspace(request.workspace)


class PermissionUpdate(PermissionEndpoint):
    permission = "permissions:update"
    request_serializer = PermissionUpdateRequest

    def handle(self, request: Request, data: dict) -> dict:
        permission = self.get_object(request, {"id": data["id"]})
        changes = endpoints.changes_of(data, "id")
        return self.serialize(services.update_permission(permission, **changes, actor=request.user))


class PermissionDelete(PermissionEndpoint):
    permission = "permissions:delete"
    request_serializer = IdRequest
    response_serializer = Deleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.delete_permission(self.get_object(request, data), actor=request.user)


# Roles


def roles_of(workspace) -> QuerySet:
    return Role.objects.in_workspace(workspace).prefetch_related("permissions")


class RoleEndpoint(endpoints.Endpoint):
    workspace_scoped = True
    response_serializer = RoleSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return roles_of(request.workspace)

    def resolve_permission_ids(self, request: Request, data: dict) -> list[Permission] | None:
        if "permission_ids" not in data:
            return None
        permissions = Permission.objects.in_workspace(request.workspace)
        return services.resolve(permissions, data["permission_ids"], field="permission_ids")


class RoleCreate(RoleEndpoint):
    permission = "roles:create"
    request_serializer = RoleCreateRequest

    def handle(self, request: Request, data: dict) -> dict:
        role = services.create_role(
            request.workspace,
            permissions=self.resolve_permission_ids(request, data),
            actor=request.user,
            **endpoints.changes_of(data, "permission_ids"),
        )
        return self.serialize(role)


class RoleDescribe(RoleEndpoint):
    read_only = True
    permission = "roles:describe"
    request_serializer = IdRequest

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(self.get_object(request, data))


class RoleList(ListEndpoint):
    permission = "roles:list"
    workspace_scoped = True
    list_key = "roles"
    response_serializer = RoleSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "description")}

    def get_queryset(self, request: Request) -> QuerySet:
        return roles_of(request.workspace)


class RoleUpdate(RoleEndpoint):
    permission = "roles:update"
    request_serializer = RoleUpdateRequest

    def handle(self, request: Request, data: dict) -> dict:
        role = self.get_object(request, data)
        services.update_role(
            role,
            **endpoints.changes_of(data, "id", "permission_ids"),
            permissions=self.resolve_permission_ids(request, data),
            actor=request.user,
        )
        return self.serialize(self.get_object(request, data))


class RoleDelete(RoleEndpoint):
    permission = "roles:delete"
    request_serializer = IdRequest
    response_serializer = Deleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.delete_role(self.get_object(request, data), actor=request.user)


# Memberships: a project-scope grant of `memberships:<action>` reaches the memberships of its project
# (CONTRACT 4).


def memberships_of(workspace) -> QuerySet:
    return Membership.objects.in_workspace(workspace).prefetch_related("roles__permissions")


class MembershipEndpoint(endpoints.Endpoint):
    workspace_scoped = True
    project_aware = True
    response_serializer = MembershipSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return memberships_of(request.workspace)

    def get_project(self, request: Request, project_id) -> Project | None:
        """The project a membership is created in or moved to, authorized like a record of it; None
        (a workspace-scope membership) needs the permission workspace-wide."""
        if project_id is None:
            self.authorize(request, request.workspace)
            return None
        project = Project.objects.in_workspace(request.workspace).filter(pk=project_id).first()
        if project is None:
            raise ApiError(400, "project_id must name a project of this workspace", "project_id")
        self.authorize(request, project)
        return project

    def get_roles(self, request: Request, data: dict) -> list[Role] | None:
        if "role_ids" not in data:
            return None
        return services.resolve(
            Role.objects.in_workspace(request.workspace), data["role_ids"], field="role_ids"
        )


class MembershipCreate(MembershipEndpoint):
    permission = "memberships:create"
    request_serializer = MembershipCreateRequest

    def handle(self, request: Request, data: dict) -> dict:
        account = Account.objects.filter(pk=data["account_id"]).first()
        if account is None:
            raise ApiError(400, "account_id must name an existing account", "account_id")
        project = self.get_project(request, data.get("project_id"))
        membership = services.create_membership(
            request.workspace,
            account=account,
            project=project,
            roles=self.get_roles(request, data),
            actor=request.user,
            **endpoints.changes_of(data, "account_id", "project_id", "role_ids"),
        )
        return self.serialize(find_one(memberships_of(request.workspace), {"id": membership.pk}))


class MembershipDescribe(MembershipEndpoint):
    read_only = True
    permission = "memberships:describe"
    request_serializer = IdRequest

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(self.get_object(request, data))


class MembershipList(endpoints.ProjectScopedList):
    permission = "memberships:list"
    workspace_scoped = True
    list_key = "memberships"
    response_serializer = MembershipSerializer
    filter_fields = {
        name: name for name in ("id", "account_id", "workspace_id", "scope", "status", "project_id")
    }

    def get_queryset(self, request: Request) -> QuerySet:
        memberships = memberships_of(request.workspace)
        visible = self.visible_projects(request)
        return memberships if visible is None else memberships.filter(project_id__in=visible)


class MembershipUpdate(MembershipEndpoint):
    permission = "memberships:update"
    request_serializer = MembershipUpdateRequest

    def handle(self, request: Request, data: dict) -> dict:
        membership = self.get_object(request, data)
        changes = endpoints.changes_of(data, "id", "project_id", "role_ids")
        if "project_id" in data:
            changes["project"] = self.get_project(request, data["project_id"])
        elif changes.get("scope") == Membership.Scope.WORKSPACE:
            self.get_project(request, None)
        services.update_membership(
            membership, **changes, roles=self.get_roles(request, data), actor=request.user
        )
        return self.serialize(find_one(memberships_of(request.workspace), {"id": membership.pk}))


class MembershipDelete(MembershipEndpoint):
    permission = "memberships:delete"
    request_serializer = IdRequest
    response_serializer = Deleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.delete_membership(self.get_object(request, data), actor=request.user)


class PermissionCheck(Endpoint):
    """Why may (or may not) this account do this here? The decision `clients/validate` makes for the
    account in the `X-Workspace` workspace, with every grant path behind it (`rbac.policy.explain`)."""

    permission = "permissions:check"
    read_only = True
    workspace_scoped = True
    request_serializer = PermissionCheckRequest
    response_serializer = PermissionCheckResult

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
