"""Writes to permissions, roles and memberships, and the owner set-up of a new workspace. Every change to
who may do what bumps the workspace's authorization generation (dropping its cached grants after commit)
and records the push event CONTRACT 8 owes, in the same transaction."""

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import QuerySet

from accounts.models import Account
from iam import events
from iam.errors import ApiError
from iam.services import apply_changes, check_unique, save_unique
from tenancy.models import Project, Workspace
from tenancy.state import forget_authorization

from .models import Membership, Permission, Role

PERMISSION_FIELDS = ("name", "code", "description", "tags", "meta")
ROLE_FIELDS = ("name", "description", "tags", "meta")
MEMBERSHIP_FIELDS = ("scope", "status", "project", "tags", "meta")
OWNER_ROLE = "owner"
ALL_PERMISSIONS = "*"


def resolve(queryset: QuerySet, ids: Iterable[UUID], *, field: str) -> list:
    """The records of `queryset` (scoped to the workspace) that `ids` name; any other id is a 400 naming the
    request field (CONTRACT 12), whether it is unknown or belongs to another workspace."""
    ids = list(dict.fromkeys(ids))
    found = list(queryset.filter(pk__in=ids))
    if len(found) != len(ids):
        noun = queryset.model._meta.verbose_name
        raise ApiError(400, f"{field} must name {noun}s of this workspace", field)
    return found


def _active_holders(memberships: QuerySet) -> list[UUID]:
    return list(
        memberships.filter(status=Membership.Status.ACTIVE).values_list("account_id", flat=True).distinct()
    )


# Workspaces


@transaction.atomic
def create_workspace(
    *,
    name: str,
    slug: str,
    config: dict,
    tags: list[str],
    meta: dict,
    description: str | None = None,
    owner: Account,
) -> Workspace:
    """CONTRACT 4: the creator becomes the owner, in the same transaction."""
    check_unique(Workspace.objects.all(), slug=slug)
    workspace = Workspace(name=name, slug=slug, description=description, config=config, tags=tags, meta=meta)
    save_unique(workspace, conflict="slug already exists", field="slug", force_insert=True)
    ensure_owner(workspace, owner)
    return workspace


@transaction.atomic
def ensure_owner(workspace: Workspace, account: Account) -> Membership:
    """Idempotent: the workspace's `*` permission, its `owner` role holding it, and the account's active
    workspace-scope membership with that role."""
    permission, _ = Permission.objects.get_or_create(
        workspace=workspace, name=ALL_PERMISSIONS, defaults={"meta": {"schema_version": "1"}}
    )
    role, _ = Role.objects.get_or_create(
        workspace=workspace,
        name=OWNER_ROLE,
        defaults={"description": "Holds every permission of the workspace.", "meta": {"schema_version": "1"}},
    )
    role.permissions.add(permission)
    membership, _ = Membership.objects.get_or_create(
        workspace=workspace,
        account=account,
        scope=Membership.Scope.WORKSPACE,
        defaults={"status": Membership.Status.ACTIVE, "meta": {"schema_version": "1"}},
    )
    if membership.status != Membership.Status.ACTIVE:
        membership.status = Membership.Status.ACTIVE
        membership.save(update_fields=["status"])
    membership.roles.add(role)
    forget_authorization(workspace.pk)
    return membership


# Permissions


@transaction.atomic
def create_permission(
    workspace: Workspace,
    *,
    name: str,
    tags: list[str],
    meta: dict,
    code: str | None = None,
    description: str | None = None,
    actor: Account | None,
) -> Permission:
    check_unique(Permission.objects.in_workspace(workspace), name=name, code=code)
    permission = Permission(
        workspace=workspace, name=name, code=code, description=description, tags=tags, meta=meta
    )
    save_unique(
        permission,
        conflict="name or code already exists",
        field="name",
        check=lambda: check_unique(Permission.objects.in_workspace(workspace), name=name, code=code),
        force_insert=True,
    )
    return permission


@transaction.atomic
def update_permission(
    permission: Permission, *, changes: dict[str, Any], actor: Account | None
) -> Permission:
    def check() -> None:
        check_unique(
            Permission.objects.in_workspace(permission.workspace),
            exclude=permission.pk,
            name=changes.get("name"),
            code=changes.get("code"),
        )

    check()
    renamed = "name" in changes and changes["name"] != permission.name
    fields = apply_changes(permission, changes, fields=PERMISSION_FIELDS)
    save_unique(
        permission, conflict="name or code already exists", field="name", check=check, update_fields=fields
    )
    if renamed:
        forget_authorization(permission.workspace_id)
        events.emit(
            "permission.updated",
            resource=("permission", permission.pk),
            account_ids=_active_holders(Membership.objects.filter(roles__permissions=permission)),
            workspace_ids=[permission.workspace_id],
        )
    return permission


@transaction.atomic
def delete_permission(permission: Permission, *, actor: Account | None) -> dict:
    """CONTRACT 6: the permission leaves the roles that held it."""
    events.emit(
        "permission.deleted",
        resource=("permission", permission.pk),
        account_ids=_active_holders(Membership.objects.filter(roles__permissions=permission)),
        workspace_ids=[permission.workspace_id],
    )
    forget_authorization(permission.workspace_id)
    summary = {"id": str(permission.pk)}
    permission.delete()
    return summary


# Roles


@transaction.atomic
def create_role(
    workspace: Workspace,
    *,
    name: str,
    permissions: list[Permission],
    tags: list[str],
    meta: dict,
    description: str | None = None,
    actor: Account | None,
) -> Role:
    check_unique(Role.objects.in_workspace(workspace), name=name)
    role = Role(workspace=workspace, name=name, description=description, tags=tags, meta=meta)
    save_unique(role, conflict="name already exists", field="name", force_insert=True)
    role.permissions.set(permissions)
    return role


@transaction.atomic
def update_role(
    role: Role, *, changes: dict[str, Any], permissions: list[Permission] | None = None, actor: Account | None
) -> Role:
    """`permissions` replaces the attached permissions (SPEC 1)."""
    check_unique(Role.objects.in_workspace(role.workspace), exclude=role.pk, name=changes.get("name"))
    changed = "name" in changes and changes["name"] != role.name
    fields = apply_changes(role, changes, fields=ROLE_FIELDS)
    save_unique(role, conflict="name already exists", field="name", update_fields=fields)
    if permissions is not None:
        before = set(role.permissions.values_list("pk", flat=True))
        role.permissions.set(permissions)
        changed = changed or before != {permission.pk for permission in permissions}
    if changed:
        role_changed(role)
    return role


def role_changed(role: Role) -> None:
    """What a change to a role's name or permissions owes: used by `update_role` and by the admin, whose
    form saves the permissions itself."""
    forget_authorization(role.workspace_id)
    events.emit(
        "role.updated",
        resource=("role", role.pk),
        account_ids=_active_holders(role.memberships.all()),
        workspace_ids=[role.workspace_id],
    )


@transaction.atomic
def delete_role(role: Role, *, actor: Account | None) -> dict:
    """CONTRACT 6: the role leaves the memberships that held it."""
    events.emit(
        "role.deleted",
        resource=("role", role.pk),
        account_ids=_active_holders(role.memberships.all()),
        workspace_ids=[role.workspace_id],
    )
    forget_authorization(role.workspace_id)
    summary = {"id": str(role.pk)}
    role.delete()
    return summary


# Memberships


def _check_scope(scope: str, project: Project | None) -> None:
    if scope == Membership.Scope.PROJECT and project is None:
        raise ApiError(400, "project_id required", "project_id")
    if scope == Membership.Scope.WORKSPACE and project is not None:
        raise ApiError(400, "project_id must be empty for workspace scope", "project_id")


def _membership_exists(
    workspace: Workspace, account_id: UUID, scope: str, project: Project | None, exclude=None
):
    return (
        Membership.objects.in_workspace(workspace)
        .filter(account_id=account_id, scope=scope, project=project)
        .exclude(pk=exclude)
        .exists()
    )


def _membership_changed(kind: str, membership: Membership) -> None:
    forget_authorization(membership.workspace_id)
    events.emit(
        kind,
        resource=("membership", membership.pk),
        account_ids=[membership.account_id],
        workspace_ids=[membership.workspace_id],
    )


@transaction.atomic
def create_membership(
    workspace: Workspace,
    *,
    account: Account,
    scope: str,
    status: str,
    roles: list[Role],
    tags: list[str],
    meta: dict,
    project: Project | None = None,
    actor: Account | None,
) -> Membership:
    _check_scope(scope, project)
    if _membership_exists(workspace, account.pk, scope, project):
        raise ApiError(409, "membership already exists")
    membership = Membership(
        workspace=workspace,
        account=account,
        scope=scope,
        status=status,
        project=project,
        tags=tags,
        meta=meta,
    )
    save_unique(membership, conflict="membership already exists", field=None, force_insert=True)
    membership.roles.set(roles)
    _membership_changed("membership.created", membership)
    return membership


@transaction.atomic
def update_membership(
    membership: Membership,
    *,
    changes: dict[str, Any],
    roles: list[Role] | None = None,
    actor: Account | None,
) -> Membership:
    """`roles` replaces the assigned roles (CONTRACT 6). Moving to workspace scope drops the project."""
    changes = dict(changes)
    scope = changes.get("scope", membership.scope)
    if scope == Membership.Scope.WORKSPACE and "scope" in changes and "project" not in changes:
        changes["project"] = None
    project = changes.get("project", membership.project)
    _check_scope(scope, project)
    if _membership_exists(membership.workspace, membership.account_id, scope, project, exclude=membership.pk):
        raise ApiError(409, "membership already exists")
    fields = apply_changes(membership, changes, fields=MEMBERSHIP_FIELDS)
    save_unique(membership, conflict="membership already exists", field=None, update_fields=fields)
    if roles is not None:
        membership.roles.set(roles)
    _membership_changed("membership.updated", membership)
    return membership


@transaction.atomic
def delete_membership(membership: Membership, *, actor: Account | None) -> dict:
    _membership_changed("membership.deleted", membership)
    summary = {"id": str(membership.pk)}
    membership.delete()
    return summary
