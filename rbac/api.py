"""The RBAC endpoints (permissions, roles, memberships, `permissions/check`), and the RBAC-aware bases
every endpoint acting on one record shares (STYLE "Authorization is decided in one place").

`iam.api` stays the app-free machinery; `RecordEndpoint` and `ProjectScopedList` put `rbac.policy`'s two
decisions in the one path every request takes: `policy.EndpointPermission` (the declared permission,
before the body; named here, not only in settings) and `RecordEndpoint.get_object` (the record, once
loaded), so no endpoint checks a project, a self access or a workspace's grants by hand. An endpoint that
loads a record, calls its service and answers the result is a declaration only (`service`, `lookup`,
`get_queryset`, the serializers): `RecordEndpoint.handle` is written once, here."""

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from rest_framework.request import Request

from accounts.models import Account
from iam.api import Endpoint, first_match, not_found
from iam.errors import ApiError
from iam.list_endpoint import ListEndpoint
from iam.serializers import prefetch
from tenancy.models import Project

from . import policy, services
from .models import Membership, Permission, Role
from .policy import EndpointPermission
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

# The bases


def changes_of(data: dict, *identifiers: str) -> dict:
    """An update's fields: the validated body less the keys that name the record or its references."""
    return {key: value for key, value in data.items() if key not in identifiers}


class RecordEndpoint(Endpoint):
    """An endpoint acting on one record. Declares `get_queryset(request)` (already scoped to the
    workspace) and `lookup` (the body's keys naming the record); `get_object(request, data)` loads the
    record and asks `policy.authorize` with it: its project (`project_aware`), its account (self
    access), the workspace it is (a workspace's own endpoints). A refusal that does not depend on the
    record comes before the lookup's 404, as CONTRACT 1 orders them.

    `handle` is written once: without `service` it answers the record (describe); with one it calls
    `service(record, **changes, actor=caller)` (update, delete), or with `creates`
    `service(workspace, **changes, actor=caller)`, and answers the result: a record serialized with
    `response_serializer` (re-read through `get_queryset` when `reload`: its relations changed), a
    summary (a delete's) as it is. `changes(request, data)` turns the body into the service's keyword
    arguments (override it to resolve references).

    `per_record`: `permission` is decided on the record alone (`policy.admit` lets the request through
    to the body)."""

    permission_classes: ClassVar[list] = [EndpointPermission]
    lookup: ClassVar[tuple[str, ...]] = ("id",)
    per_record: ClassVar[bool] = False
    service: ClassVar[Callable[..., Any] | None] = None
    creates: ClassVar[bool] = False
    reload: ClassVar[bool] = False

    def get_queryset(self, request: Request) -> QuerySet:
        raise NotImplementedError

    def find(self, request: Request, data: dict) -> Any | None:
        """The record the body names, or None. Override for a lookup that is more than equal keys."""
        return first_match(self.get_queryset(request), data, self.lookup)

    def get_object(self, request: Request, data: dict) -> Any:
        record = self.find(request, data)
        self.authorize(request, record, fields=data)
        if record is None:
            raise not_found(self.get_queryset(request))
        return record

    def authorize(self, request: Request, record: Any, *, fields: Any = None) -> None:
        """`policy.authorize` for this endpoint; also for a record the request is about to create or move
        to (a membership's project, or the workspace itself for a workspace-scope membership)."""
        policy.authorize(
            request.user,
            getattr(request, "workspace", None),
            self.permission,
            record,
            project_scoped=self.project_aware,
            fields=fields,
        )

    def handle(self, request: Request, data: dict) -> Any:
        target = request.workspace if self.creates else self.get_object(request, data)
        service = type(self).service  # read on the class: a plain function, not a bound method
        if service is None:
            return self.serialize(target)
        result = self.call(service, target, self.changes(request, data), request)
        if not isinstance(result, Model):
            return result
        if self.reload:
            result = self.get_queryset(request).get(pk=result.pk)
        return self.serialize(result)

    def changes(self, request: Request, data: dict) -> dict:
        """The service's keyword arguments: the body, less the keys naming the record (an update's)."""
        return data if self.creates else changes_of(data, *self.lookup)

    def call(self, service: Callable[..., Any], target: Any, changes: dict, request: Request) -> Any:
        return service(target, **changes, actor=request.user)


class ProjectScopedList(ListEndpoint):
    """A list whose records belong to projects: a project-scope grant of `permission` lets the caller
    in, and `visible_projects` narrows the list to the projects where it holds it."""

    permission_classes: ClassVar[list] = [EndpointPermission]
    project_aware = True

    def visible_projects(self, request: Request) -> list[str] | None:
        return policy.visible_projects(request.user, request.workspace, self.permission)


# Permissions


class PermissionEndpoint(RecordEndpoint):
    workspace_scoped = True
    lookup = ("id", "code")
    request_serializer = PermissionRef
    response_serializer = PermissionSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Permission.objects.in_workspace(request.workspace)


class PermissionCreate(PermissionEndpoint, route="permissions/create"):
    permission = "permissions:create"
    creates = True
    request_serializer = PermissionCreateRequest
    service = services.create_permission


class PermissionDescribe(PermissionEndpoint, route="permissions/describe"):
    read_only = True
    permission = "permissions:describe"


class PermissionList(ListEndpoint, route="permissions/list"):
    permission = "permissions:list"
    workspace_scoped = True
    list_key = "permissions"
    response_serializer = PermissionSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "code", "description")}

    def get_queryset(self, request: Request) -> QuerySet:
        return Permission.objects.in_workspace(request.workspace)


class PermissionUpdate(PermissionEndpoint, route="permissions/update"):
    permission = "permissions:update"
    lookup = ("id",)  # `code` is a change here
    request_serializer = PermissionUpdateRequest
    service = services.update_permission


class PermissionDelete(PermissionEndpoint, route="permissions/delete"):
    permission = "permissions:delete"
    request_serializer = IdRequest
    response_serializer = Deleted
    service = services.delete_permission


# Roles


def roles_of(workspace) -> QuerySet:
    return Role.objects.in_workspace(workspace).prefetch_related(prefetch("permissions"))


class RoleEndpoint(RecordEndpoint):
    workspace_scoped = True
    reload = True  # the answer lists the role's permissions as they are now
    request_serializer = IdRequest
    response_serializer = RoleSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return roles_of(request.workspace)

    def changes(self, request: Request, data: dict) -> dict:
        changes = changes_of(super().changes(request, data), "permission_ids")
        if "permission_ids" in data:
            permissions = Permission.objects.in_workspace(request.workspace)
            changes["permissions"] = services.resolve(
                permissions, data["permission_ids"], field="permission_ids"
            )
        return changes


class RoleCreate(RoleEndpoint, route="roles/create"):
    permission = "roles:create"
    creates = True
    request_serializer = RoleCreateRequest
    service = services.create_role


class RoleDescribe(RoleEndpoint, route="roles/describe"):
    read_only = True
    permission = "roles:describe"


class RoleList(ListEndpoint, route="roles/list"):
    permission = "roles:list"
    workspace_scoped = True
    list_key = "roles"
    response_serializer = RoleSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "description")}

    def get_queryset(self, request: Request) -> QuerySet:
        return roles_of(request.workspace)


class RoleUpdate(RoleEndpoint, route="roles/update"):
    permission = "roles:update"
    request_serializer = RoleUpdateRequest
    service = services.update_role


class RoleDelete(RoleEndpoint, route="roles/delete"):
    permission = "roles:delete"
    response_serializer = Deleted
    service = services.delete_role


# Memberships: a project-scope grant of `memberships:<action>` reaches the memberships of its project
# (CONTRACT 4).


def memberships_of(workspace) -> QuerySet:
    roles = Role.objects.prefetch_related(prefetch("permissions"))
    return Membership.objects.in_workspace(workspace).prefetch_related(prefetch("roles", roles))


class MembershipEndpoint(RecordEndpoint):
    workspace_scoped = True
    project_aware = True
    reload = True  # the answer lists the membership's roles as they are now
    request_serializer = IdRequest
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

    def changes(self, request: Request, data: dict) -> dict:
        """The account (a new membership's), the project it is in or moves to, and the roles, resolved
        in this order (each refusal before the next)."""
        changes = changes_of(super().changes(request, data), "account_id", "project_id", "role_ids")
        if self.creates:
            changes["account"] = Account.objects.filter(pk=data["account_id"]).first()
            if changes["account"] is None:
                raise ApiError(400, "account_id must name an existing account", "account_id")
            changes["project"] = self.get_project(request, data.get("project_id"))
        elif "project_id" in data:
            changes["project"] = self.get_project(request, data["project_id"])
        elif changes.get("scope") == Membership.Scope.WORKSPACE:
            self.get_project(request, None)
        if "role_ids" in data:
            roles = Role.objects.in_workspace(request.workspace)
            changes["roles"] = services.resolve(roles, data["role_ids"], field="role_ids")
        return changes


class MembershipCreate(MembershipEndpoint, route="memberships/create"):
    permission = "memberships:create"
    creates = True
    request_serializer = MembershipCreateRequest
    service = services.create_membership


class MembershipDescribe(MembershipEndpoint, route="memberships/describe"):
    read_only = True
    permission = "memberships:describe"


class MembershipList(ProjectScopedList, route="memberships/list"):
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


class MembershipUpdate(MembershipEndpoint, route="memberships/update"):
    permission = "memberships:update"
    request_serializer = MembershipUpdateRequest
    service = services.update_membership


class MembershipDelete(MembershipEndpoint, route="memberships/delete"):
    permission = "memberships:delete"
    response_serializer = Deleted
    service = services.delete_membership


class PermissionCheck(Endpoint, route="permissions/check"):
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
