"""The RBAC endpoints (permissions, roles, memberships, `permissions/check`), and the RBAC-aware bases
every endpoint acting on one record shares (STYLE "Authorization is decided in one place").

`iam.api` stays the app-free machinery; `RecordEndpoint` and `ProjectScopedList` put `rbac.policy`'s two
decisions in the one path every request takes: `policy.EndpointPermission` (the declared permission,
before the body; named here, not only in settings) and `RecordEndpoint.get_object` (the record, once
loaded), so no endpoint checks a project, a self access or a workspace's grants by hand. An endpoint that
loads a record, calls its service and answers the result is a declaration only (`model`, `ref`, the
serializers, `service`): its permission and its workspace scoping follow from its route and its model
(`Records`), and `RecordEndpoint.handle` is written once, here."""

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from rest_framework.request import Request
from rest_framework.serializers import Serializer

from accounts.models import Account
from iam.api import EncodedJson, Endpoint, first_match, not_found
from iam.errors import ApiError
from iam.list_endpoint import ListEndpoint
from iam.serializers import prefetch
from tenancy.models import Project, WorkspaceScopedQuerySet

from . import policy, services
from .endpoints import answer_fresh, get_object
from .models import Invitation, Membership, Permission, Role
from .policy import EndpointPermission
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

# The bases


def changes_of(data: dict, *identifiers: str) -> dict:
    """An update's fields: the validated body less the keys that name the record or its references."""
    return {key: value for key, value in data.items() if key not in identifiers}


class Records:
    """What an endpoint reaches and what it needs. The records of its `model`, each loaded with its
    `related` relations (`iam.serializers.prefetch` paths, a query each whatever the count). Declaring a
    model whose records belong to a workspace (`WorkspaceScopedQuerySet`) makes the endpoint
    workspace-scoped: it acts in the `X-Workspace` workspace (CONTRACT 2) and reaches only that
    workspace's records, so no endpoint of a tenant's records can be declared unscoped. Its route names
    the permission it needs (`policy.route_permission`, CONTRACT 4), so none can be declared amiss."""

    model: ClassVar[type[Model]]
    related: ClassVar[tuple[str, ...]] = ()
    workspace_scoped: ClassVar[bool]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "model" in vars(cls):
            cls.workspace_scoped = isinstance(cls.model.objects.none(), WorkspaceScopedQuerySet)
        if cls.route is not None:
            # A permission written on the class is held to the one its route names (CONTRACT 4).
            named = policy.route_permission(cls.route)
            assert vars(cls).get("permission", named) == named, f"{cls.__name__}: the route needs {named}"
            cls.permission = named

    def get_queryset(self, request: Request) -> QuerySet:
        records = self.model.objects.prefetch_related(*map(prefetch, self.related))
        return records.in_workspace(request.workspace) if self.workspace_scoped else records


class RecordEndpoint(Records, Endpoint):
    """An endpoint acting on one record. Declares its `model` (`Records`) and `ref`, the serializer of
    the body's keys that name the record (`id` by default): the request of the routes that only name
    one (describe, delete) and, by its fields, the `lookup`. `get_object(request, data)` loads the
    record and asks `policy.authorize` with it: its project (`project_aware`), its account (self
    access), the workspace it is (a workspace's own endpoints). A refusal that does not depend on the
    record comes before the lookup's 404, as CONTRACT 1 orders them.

    `handle` is written once: without `service` it answers the record (describe); with one it calls
    `service(record, **changes, actor=caller)` (update, delete), or with `creates`
    `service(workspace, **changes, actor=caller)`, and answers the result: a record serialized with
    `response_serializer` (when `reload`, re-read as the database now holds it, its relations changed, and
    written by an `iam.serializers.Encoder`: `written`), a summary (a delete's) as it is.
    `changes(request, data)` turns the body into the service's keyword arguments (override it to resolve
    references).

    `per_record`: `permission` is decided on the record alone (`policy.admit` lets the request through
    to the body)."""

    permission_classes: ClassVar[list] = [EndpointPermission]
    ref: ClassVar[type[Serializer]] = IdRequest
    lookup: ClassVar[tuple[str, ...]] = ("id",)
    request_serializer = IdRequest
    per_record: ClassVar[bool] = False
    service: ClassVar[Callable[..., Any] | None] = None
    creates: ClassVar[bool] = False
    reload: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "ref" in vars(cls):
            cls.request_serializer = cls.ref
            cls.lookup = tuple(cls.ref._declared_fields)

    def find(self, request: Request, data: dict) -> Any | None:
        """The record the body names, or None. Override for a lookup that is more than equal keys."""
        return first_match(self.get_queryset(request).prefetch_related(None), data, self.lookup)

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
            return self.written(target) if self.reload else self.serialize(target)
        result = self.call(service, target, self.changes(request, data), request)
        if not isinstance(result, Model):
            return result
        return self.written(result) if self.reload else self.serialize(result)

    def written(self, record: Model) -> EncodedJson:
        """`record` as the database now holds it, written as a list page writes its records: each nested
        record read once, JSON columns as stored (CONTRACT 16: a role of 500 permissions at their size
        limits is never held as parsed objects)."""
        return answer_fresh(self.request, self.response_serializer, self.get_queryset(self.request), record)

    def changes(self, request: Request, data: dict) -> dict:
        """The service's keyword arguments: the body, less the keys naming the record (an update's)."""
        return data if self.creates else changes_of(data, *self.lookup)

    def call(self, service: Callable[..., Any], target: Any, changes: dict, request: Request) -> Any:
        return service(target, **changes, actor=request.user)


class RecordList(Records, ListEndpoint):
    """A list of `model`'s records (`Records`)."""

    permission_classes: ClassVar[list] = [EndpointPermission]


class ProjectScopedList(RecordList):
    """A list whose records belong to projects (`project_field`): a project-scope grant of `permission`
    lets the caller in, and the list shows the records of the projects where it holds it."""

    project_aware = True
    project_field: ClassVar[str] = "project_id"

    def get_queryset(self, request: Request) -> QuerySet:
        records = super().get_queryset(request)
        visible = policy.visible_projects(request.user, request.workspace, self.permission)
        return records if visible is None else records.filter(**{f"{self.project_field}__in": visible})


# Permissions


class PermissionEndpoint(RecordEndpoint):
    """A permission of the workspace, named by `id` or `code` (both must match when both are given)."""

    model = Permission
    ref = PermissionRef
    response_serializer = PermissionSerializer


class PermissionCreate(PermissionEndpoint, route="permissions/create"):
    """A new permission of the `X-Workspace` workspace: `name` is `*` or `resource:action`, either side `*` or
    letters, digits, `_`, `.` and `-` (at most 128 characters). The caller's own grants must cover the name:
    nobody grants what they do not hold (403 `cannot grant permissions you do not hold`)."""

    example_request = {
        "name": "invoices:read",
        "code": "invoices:read",
        "description": "Read invoices",
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    creates = True
    request_serializer = PermissionCreateRequest
    service = services.create_permission


class PermissionDescribe(PermissionEndpoint, route="permissions/describe"):
    """A permission of the `X-Workspace` workspace by `id` or `code`; one of another workspace is not
    found (404)."""

    example_request = {"code": "invoices:read"}

    read_only = True


class PermissionList(RecordList, route="permissions/list"):
    """The permissions of the `X-Workspace` workspace."""

    example_request = {"filter": {"fields": {"name": "invoices:read"}}, "options": {"limit": 100}}

    model = Permission
    list_key = "permissions"
    response_serializer = PermissionSerializer
    filter_fields = {name: name for name in ("id", "workspace_id", "name", "code", "description")}


class PermissionUpdate(PermissionEndpoint, route="permissions/update"):
    """Changes a permission named by `id` (`code` is a change here). A new `name` must be covered by the
    caller's own grants; the roles holding the permission keep it."""

    example_request = {
        "id": "c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18",
        "description": "Read and export invoices",
    }

    lookup = ("id",)
    request_serializer = PermissionUpdateRequest
    service = services.update_permission


class PermissionDelete(PermissionEndpoint, route="permissions/delete"):
    """Deletes a permission named by `id`; the roles that held it lose it, and so do their holders, at
    once."""

    example_request = {"id": "c2e7a9b4-1d3f-4a6c-8e5b-7f9d2c4a6e18"}

    request_serializer = IdRequest
    response_serializer = Deleted
    service = services.delete_permission


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


class MembershipEndpoint(RecordEndpoint):
    """A membership of the workspace, named by `id`, with its roles as they are after a change
    (`reload`). A project-scope grant of `memberships:<action>` reaches the memberships of its project
    (CONTRACT 4), and the project a membership is created in or moved to is authorized like one of its
    records (`get_project`)."""

    model = Membership
    related = ("roles", "roles__permissions")
    project_aware = True
    reload = True
    response_serializer = MembershipSerializer

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
    """Adds an account to the `X-Workspace` workspace, workspace-wide or in one project, with `role_ids`:
    roles of this workspace, covered by the caller's own grants (else 403 `cannot grant permissions you do not
    hold`). For another account, unless the caller is an operator, the membership is `invited` whatever
    `status` says and the account is e-mailed a link to accept it (valid 7 days, once). A project-scope grant
    reaches its own project."""

    example_request = {
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "scope": "project",
        "status": "invited",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "tags": ["contractor"],
        "meta": {"schema_version": "1"},
    }

    creates = True
    request_serializer = MembershipCreateRequest
    service = services.create_membership


class MembershipDescribe(MembershipEndpoint, route="memberships/describe"):
    """A membership of the `X-Workspace` workspace by `id`, with its roles; a project-scope grant of
    `memberships:describe` reaches the memberships of its own project."""

    example_request = {"id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64"}

    read_only = True


class MembershipList(ProjectScopedList, route="memberships/list"):
    """The memberships of the `X-Workspace` workspace, each with its roles; a caller whose grant is
    project-scope sees those of its own projects."""

    example_request = {
        "filter": {"fields": {"status": "active", "scope": "workspace"}},
        "options": {"limit": 100, "order_bys": ["!created_at"]},
    }

    model = Membership
    related = MembershipEndpoint.related
    list_key = "memberships"
    response_serializer = MembershipSerializer
    filter_fields = {
        name: name for name in ("id", "account_id", "workspace_id", "scope", "status", "project_id")
    }


class MembershipUpdate(MembershipEndpoint, route="memberships/update"):
    """Changes a membership named by `id`: its scope and project, status, `role_ids` (replaces its roles; each
    must be covered by the caller's own grants) and meta. Only the invited account can make an invited
    membership `active` (else 403 `only the invited account can accept`); an accepted one may be suspended and
    reactivated."""

    example_request = {
        "id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "status": "suspended",
    }

    request_serializer = MembershipUpdateRequest
    service = services.update_membership


class MembershipDelete(MembershipEndpoint, route="memberships/delete"):
    """Removes a membership named by `id`: the account loses its roles there at once. A project-scope
    grant reaches the memberships of its own project."""

    example_request = {"id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64"}

    response_serializer = Deleted
    service = services.delete_membership


# Invitations by e-mail (accept, decline and the invitee's own list: authn/invitations.py)


class InvitationEndpoint(RecordEndpoint):
    """An invitation of the workspace, named by `id`, with its roles."""

    model = Invitation
    related = ("roles", "roles__permissions")
    reload = True
    response_serializer = InvitationSerializer


class InvitationCreate(InvitationEndpoint, route="invitations/create"):
    """Invites an e-mail address to the `X-Workspace` workspace, workspace-wide or in one project
    (`project_id`), with `role_ids`: roles of this workspace, covered by the caller's own grants (nobody
    grants what it does not hold). The address is e-mailed a link to accept or decline, valid 7 days and
    usable once, whether or not an account holds it: the answer is the same either way. A pending
    invitation for the same address and place, or a member there already, is a conflict (409)."""

    permission = "invitations:create"
    example_request = {
        "email": "bob@example.com",
        "scope": "workspace",
        "role_ids": ["7a1d2c3b-4e5f-4a6b-8c9d-0e1f2a3b4c5d"],
    }
    creates = True
    request_serializer = InvitationCreateRequest
    service = services.create_invitation

    def changes(self, request: Request, data: dict) -> dict:
        changes = changes_of(data, "project_id", "role_ids")
        project_id = data.get("project_id")
        changes["project"] = None
        if project_id is not None:
            changes["project"] = Project.objects.in_workspace(request.workspace).filter(pk=project_id).first()
            if changes["project"] is None:
                raise ApiError(400, "project_id must name a project of this workspace", "project_id")
        roles = Role.objects.in_workspace(request.workspace)
        changes["roles"] = services.resolve(roles, data["role_ids"], field="role_ids")
        return changes


class InvitationDescribe(InvitationEndpoint, route="invitations/describe"):
    """An invitation of the `X-Workspace` workspace by `id`; one of another workspace is not found."""

    permission = "invitations:describe"
    example_request = {"id": "3f0c6d2a-8b1e-4c5d-9a7f-2e6b1c4d8a90"}
    read_only = True


class InvitationList(RecordList, route="invitations/list"):
    """The invitations of the `X-Workspace` workspace, each with its roles. `status` filters by what an
    invitation is now: `pending`, `accepted`, `declined`, `revoked` or `expired` (past `expires_at`)."""

    permission = "invitations:list"
    example_request = {"filter": {"fields": {"status": "pending"}}, "options": {"limit": 100}}
    model = Invitation
    related = InvitationEndpoint.related
    list_key = "invitations"
    response_serializer = InvitationSerializer
    filter_fields = {name: name for name in ("id", "email", "status", "scope", "project_id")}

    def handle(self, request: Request, data: dict) -> dict:
        filters = dict(data.get("filter") or {})
        fields = dict(filters.get("fields") or {})
        self.status = fields.pop("status", None)
        if "status" in filters.get("fields", {}) and self.status not in Invitation.Status.values:
            raise ApiError(400, "invalid value for filter field: status", "status")
        return super().handle(request, {**data, "filter": {**filters, "fields": fields}})

    def get_queryset(self, request: Request) -> QuerySet:
        records = super().get_queryset(request)
        if self.status is None:
            return records
        return records.filter(services.invitations_in_status(self.status))


class InvitationRevoke(InvitationEndpoint, route="invitations/revoke"):
    """Withdraws a pending invitation named by `id`: its link opens nothing from then on."""

    permission = "invitations:revoke"
    example_request = {"id": "3f0c6d2a-8b1e-4c5d-9a7f-2e6b1c4d8a90"}
    service = services.revoke_invitation


class PermissionCheck(Endpoint, route="permissions/check"):
    """Why may (or may not) this account do this here? The decision `clients/validate` makes for the
    account in the `X-Workspace` workspace, with every grant path behind it (`rbac.policy.explain`)."""

    example_request = {
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "permission": "invoices:read",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
    }

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
