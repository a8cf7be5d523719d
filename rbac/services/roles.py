"""Writes to roles (`roles/create|update|delete`)."""

from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.models import Account
from iam.platform import audit, events
from iam.platform.service_helpers import UNSET, apply_changes, save_unique, sent
from tenancy.models import Workspace
from tenancy.quotas import check_quota
from tenancy.workspace_cache import forget_authorization

from .. import policy
from ..models import Permission, Role
from .memberships import _active_holders, _ids_change, machine_holders


@transaction.atomic
def create_role(
    workspace: Workspace,
    *,
    permissions: list[Permission],
    actor: Account | None,
    name: str,
    tags: list[str],
    meta: dict[str, Any],
    description: str | None = None,
) -> Role:
    policy.require_grantable(actor, workspace, [permission.name for permission in permissions])
    _check_permissions_per_role(permissions, actor=actor)
    peers = Role.objects.in_workspace(workspace)
    check_quota("roles", settings.IAM_QUOTA_ROLES, actor=actor, records=peers, owner=workspace)
    role = Role(workspace=workspace, name=name, description=description, tags=tags, meta=meta)
    save_unique(role, peers, {"name": name}, force_insert=True)
    audit.record(
        "role.create",
        resource=("role", role.pk),
        workspace_id=workspace.pk,
        changes=audit.created(role, ("name", "description", "tags"))
        | _ids_change(None, permissions, "permission_ids"),
        actor=actor,
    )
    role.permissions.set(permissions)
    return role


@transaction.atomic
def update_role(
    role: Role,
    *,
    actor: Account | None,
    name: str = UNSET,
    description: str | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
    permissions: list[Permission] | None = None,
) -> Role:
    """`permissions` replaces the attached permissions (docs/api.md#validation)."""
    if permissions is not None:
        policy.require_grantable(actor, role.workspace_id, [permission.name for permission in permissions])
        _check_permissions_per_role(permissions, actor=actor)
    changes = sent(name=name, description=description, tags=tags, meta=meta)
    changed = "name" in changes and changes["name"] != role.name
    entry = audit.diff(role, changes) | _ids_change(role.permissions, permissions, "permission_ids")
    fields = apply_changes(role, changes)
    save_unique(
        role,
        Role.objects.in_workspace(role.workspace_id),
        {"name": changes.get("name")},
        update_fields=fields,
    )
    if entry:
        audit.record(
            "role.update",
            resource=("role", role.pk),
            workspace_id=role.workspace_id,
            changes=entry,
            actor=actor,
        )
    if permissions is not None:
        before = set(role.permissions.values_list("pk", flat=True))
        role.permissions.set(permissions)
        changed = changed or before != {permission.pk for permission in permissions}
    if changed:  # a change to what the role grants
        forget_authorization(role.workspace_id)
        events.emit(
            "role.updated",
            resource=("role", role.pk),
            account_ids=_active_holders(role.memberships.all()),
            workspace_ids=[role.workspace_id],
            data=machine_holders(role.service_accounts.all()),
        )
    return role


def _check_permissions_per_role(permissions: list[Permission], *, actor: Account | None) -> None:
    check_quota(
        "permissions per role",
        settings.IAM_QUOTA_PERMISSIONS_PER_ROLE,
        actor=actor,
        size=len({permission.pk for permission in permissions}),
        field="permission_ids",
    )


@transaction.atomic
def delete_role(role: Role, *, actor: Account | None) -> dict:
    """docs/api.md#validation: the role leaves the memberships that held it."""
    audit.record(
        "role.delete",
        resource=("role", role.pk),
        workspace_id=role.workspace_id,
        changes=audit.removed(role, ("name",)),
        actor=actor,
    )
    forget_authorization(role.workspace_id)
    events.emit(
        "role.deleted",
        resource=("role", role.pk),
        account_ids=_active_holders(role.memberships.all()),
        workspace_ids=[role.workspace_id],
        data=machine_holders(role.service_accounts.all()),
    )
    summary = {"id": str(role.pk)}
    role.delete()
    return summary
