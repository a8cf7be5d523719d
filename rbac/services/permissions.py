"""Writes to permissions (`permissions/create|update|delete`)."""

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
from ..models import Membership, Permission, ServiceAccount
from .memberships import _active_holders, machine_holders


@transaction.atomic
def create_permission(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str,
    tags: list[str],
    meta: dict[str, Any],
    code: str | None = None,
    description: str | None = None,
) -> Permission:
    policy.require_grantable(actor, workspace, [name])
    peers = Permission.objects.in_workspace(workspace)
    check_quota("permissions", settings.IAM_QUOTA_PERMISSIONS, actor=actor, records=peers, owner=workspace)
    permission = Permission(
        workspace=workspace, name=name, code=code, description=description, tags=tags, meta=meta
    )
    save_unique(permission, peers, {"name": name, "code": code}, force_insert=True)
    audit.record(
        "permission.create",
        resource=("permission", permission.pk),
        workspace_id=workspace.pk,
        changes=audit.created(permission, ("name", "code", "description", "tags")),
        actor=actor,
    )
    return permission


@transaction.atomic
def update_permission(
    permission: Permission,
    *,
    actor: Account | None,
    name: str = UNSET,
    code: str | None = UNSET,
    description: str | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Permission:
    changes = sent(name=name, code=code, description=description, tags=tags, meta=meta)
    renamed = "name" in changes and changes["name"] != permission.name
    if renamed:
        policy.require_grantable(actor, permission.workspace_id, [name])
    entry = audit.diff(permission, changes)
    fields = apply_changes(permission, changes)
    peers = Permission.objects.in_workspace(permission.workspace_id)
    save_unique(
        permission, peers, {"name": changes.get("name"), "code": changes.get("code")}, update_fields=fields
    )
    if entry:
        audit.record(
            "permission.update",
            resource=("permission", permission.pk),
            workspace_id=permission.workspace_id,
            changes=entry,
            actor=actor,
        )
    if renamed:
        forget_authorization(permission.workspace_id)
        events.emit(
            "permission.updated",
            resource=("permission", permission.pk),
            account_ids=_active_holders(Membership.objects.filter(roles__permissions=permission)),
            workspace_ids=[permission.workspace_id],
            data=machine_holders(ServiceAccount.objects.filter(roles__permissions=permission)),
        )
    return permission


@transaction.atomic
def delete_permission(permission: Permission, *, actor: Account | None) -> dict:
    """docs/api.md#validation: the permission leaves the roles that held it."""
    audit.record(
        "permission.delete",
        resource=("permission", permission.pk),
        workspace_id=permission.workspace_id,
        changes=audit.removed(permission, ("name", "code")),
        actor=actor,
    )
    forget_authorization(permission.workspace_id)
    events.emit(
        "permission.deleted",
        resource=("permission", permission.pk),
        account_ids=_active_holders(Membership.objects.filter(roles__permissions=permission)),
        workspace_ids=[permission.workspace_id],
        data=machine_holders(ServiceAccount.objects.filter(roles__permissions=permission)),
    )
    summary = {"id": str(permission.pk)}
    permission.delete()
    return summary
