"""Writes to service accounts and their API keys (`service-accounts/create|update|delete`,
`service-accounts/create-key|revoke-key`; docs/api.md#service-accounts)."""

import secrets
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from iam.http.errors import ApiError
from iam.platform import audit, crypto, events
from iam.platform.service_helpers import UNSET, apply_changes, sent
from tenancy.models import Workspace
from tenancy.quotas import check_quota
from tenancy.workspace_cache import forget_authorization

from .. import policy
from ..machine_cache import KEY_PREFIX, forget_keys, forget_service_account
from ..models import Role, ServiceAccount, ServiceAccountKey
from .memberships import _ids_change, granted_by

MAX_LIVE_KEYS = 10  # docs/api.md#api-keys
KEY_NOT_FOUND = "key not found"
EXPIRES_IN_THE_PAST = "expires_at must be in the future"


def _check_roles(roles: list[Role], *, actor: Any) -> None:
    check_quota(
        "roles per service account",
        settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP,
        actor=actor,
        size=len({role.pk for role in roles}),
        field="role_ids",
    )


def _updated(service_account: ServiceAccount) -> None:
    """What changes the service account's authorization: its cached grants and keys are dropped, and the
    clients of its workspace told (`data.service_account_ids`)."""
    forget_authorization(service_account.workspace_id)
    forget_service_account(service_account)
    events.emit(
        "service_account.updated",
        resource=("service_account", service_account.pk),
        account_ids=[],
        workspace_ids=[service_account.workspace_id],
        data={"service_account_ids": [str(service_account.pk)]},
    )


@transaction.atomic
def create_service_account(
    workspace: Workspace,
    *,
    name: str,
    roles: list[Role],
    tags: list[str],
    meta: dict[str, Any],
    enabled: bool = True,
    actor: Any,
) -> ServiceAccount:
    """Its roles follow the escalation rule (docs/api.md#authorization): the caller's own grants in the
    workspace must cover every permission they hold."""
    policy.require_grantable(actor, workspace, granted_by(roles))
    _check_roles(roles, actor=actor)
    check_quota(
        "service accounts",
        settings.IAM_QUOTA_SERVICE_ACCOUNTS,
        actor=actor,
        records=ServiceAccount.objects.in_workspace(workspace),
        owner=workspace,
    )
    service_account = ServiceAccount.objects.create(
        workspace=workspace, name=name, enabled=enabled, tags=tags, meta=meta
    )
    audit.record(
        "service_account.create",
        resource=("service_account", service_account.pk),
        workspace_id=workspace.pk,
        changes=audit.created(service_account, ("name", "enabled", "tags"))
        | _ids_change(None, roles, "role_ids"),
        actor=actor,
    )
    service_account.roles.set(roles)
    forget_authorization(workspace.pk)
    return service_account


@transaction.atomic
def update_service_account(
    service_account: ServiceAccount,
    *,
    actor: Any,
    name: str = UNSET,
    enabled: bool = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
    roles: list[Role] | None = None,
) -> ServiceAccount:
    """`roles` replaces its roles (each grantable by the caller). A change of its roles or of `enabled`
    acts at once: its keys' cached state and its grants are dropped, and `service_account.updated` pushed."""
    if roles is not None:
        policy.require_grantable(actor, service_account.workspace_id, granted_by(roles))
        _check_roles(roles, actor=actor)
    changes = sent(name=name, enabled=enabled, tags=tags, meta=meta)
    entry = audit.diff(service_account, changes) | _ids_change(service_account.roles, roles, "role_ids")
    changed = "enabled" in entry or "role_ids" in entry
    renamed = "name" in entry
    fields = apply_changes(service_account, changes)
    service_account.save(update_fields=fields)
    if roles is not None:
        service_account.roles.set(roles)
    if entry:
        audit.record(
            "service_account.update",
            resource=("service_account", service_account.pk),
            workspace_id=service_account.workspace_id,
            changes=entry,
            actor=actor,
        )
    if changed:
        _updated(service_account)
    elif renamed:  # `clients/validate` answers its name from the keys' entries
        forget_service_account(service_account)
    return service_account


@transaction.atomic
def delete_service_account(service_account: ServiceAccount, *, actor: Any) -> dict:
    """Its keys go with it, refused at once."""
    audit.record(
        "service_account.delete",
        resource=("service_account", service_account.pk),
        workspace_id=service_account.workspace_id,
        changes=audit.removed(service_account, ("name",)),
        actor=actor,
    )
    forget_authorization(service_account.workspace_id)
    forget_service_account(service_account)
    events.emit(
        "service_account.deleted",
        resource=("service_account", service_account.pk),
        account_ids=[],
        workspace_ids=[service_account.workspace_id],
        data={"service_account_ids": [str(service_account.pk)]},
    )
    summary = {"id": str(service_account.pk)}
    service_account.delete()
    return summary


# API keys


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@transaction.atomic
def create_key(
    service_account: ServiceAccount, *, name: str, expires_at: datetime | None = None, actor: Any
) -> tuple[ServiceAccountKey, str]:
    """A new key, and the key itself (answered once, stored as its keyed digest). Whoever holds it acts
    with the service account's roles, so the caller's own grants must cover every permission they hold
    (the escalation rule). At most MAX_LIVE_KEYS live keys (not revoked, not expired)."""
    now = timezone.now()
    if expires_at is not None and expires_at <= now:
        raise ApiError(400, EXPIRES_IN_THE_PAST, "expires_at")
    policy.require_grantable(actor, service_account.workspace_id, granted_by(service_account.roles.all()))
    # Counted under the service account's row lock: two concurrent creates at the edge queue on it.
    ServiceAccount.objects.select_for_update(no_key=True).filter(pk=service_account.pk).first()
    live = ServiceAccountKey.objects.filter(service_account=service_account, revoked_at__isnull=True).exclude(
        expires_at__lte=now
    )
    if live.count() >= MAX_LIVE_KEYS:
        raise ApiError(403, f"quota reached: keys per service account ({MAX_LIVE_KEYS})")
    raw = new_key()
    key = ServiceAccountKey.objects.create(
        service_account=service_account,
        name=name,
        prefix=raw[:12],
        digest=crypto.digest(raw),
        created_at=now,
        expires_at=expires_at,
    )
    audit.record(
        "service_account.create_key",
        resource=("service_account", service_account.pk),
        workspace_id=service_account.workspace_id,
        changes={"key_id": {"before": None, "after": str(key.pk)}}
        | audit.created(key, ("name", "prefix", "expires_at")),
        actor=actor,
    )
    return key, raw


@transaction.atomic
def revoke_key(service_account: ServiceAccount, key_id: Any, *, actor: Any) -> dict:
    """The key stops working at once, in every process (its cached entry is purged around the commit);
    another service account's key, or one already revoked, is not found."""
    key = (
        ServiceAccountKey.objects.select_for_update()
        .filter(pk=key_id, service_account=service_account, revoked_at__isnull=True)
        .first()
    )
    if key is None:
        raise ApiError(404, KEY_NOT_FOUND, "key_id")
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    audit.record(
        "service_account.revoke_key",
        resource=("service_account", service_account.pk),
        workspace_id=service_account.workspace_id,
        changes={
            "key_id": {"before": str(key.pk), "after": None},
            "revoked": {"before": False, "after": True},
        },
        actor=actor,
    )
    forget_keys([key.digest])
    events.emit(
        "service_account.updated",
        resource=("service_account", service_account.pk),
        account_ids=[],
        workspace_ids=[service_account.workspace_id],
        data={"service_account_ids": [str(service_account.pk)], "key_id": str(key.pk)},
    )
    return {"id": str(key.pk), "revoked": True}
