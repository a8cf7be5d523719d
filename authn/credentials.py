"""Credentials' services: found by `id` and `account_id`, updated by operators, linked by
an OAuth provider, revoked and deleted (docs/api.md#credentials). No create: registration and OAuth make
them."""

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from accounts.services import check_password_rules, end_sessions, set_password
from iam.http.errors import ApiError
from iam.platform import audit
from iam.platform.service_helpers import UNSET, apply_changes, sent, unique_conflict
from tenancy.workspace_cache import root_workspace

from .models import Credential


def _add_credential(account: Account, *, actor: Account | None, **fields: Any) -> Credential:
    """A credential of the account, in the root workspace (docs/api.md#the-root-workspace: no tenant holds an
    account's credential), recorded with each field given."""
    credential = Credential(account=account, workspace=root_workspace(), **fields)
    credential.save(force_insert=True)
    audit.record(
        "credential.create",
        resource=("credential", credential.pk),
        workspace_id=credential.workspace_id,
        changes=audit.created(credential, ("account_id", *fields)),
        actor=actor,
    )
    return credential


# Credentials (docs/api.md#credentials, #answers). No create: registration and OAuth make them.


def _check_credential_conflicts(credential: Credential) -> None:
    others = Credential.objects.exclude(pk=credential.pk)
    if (
        credential.kind == Credential.Kind.PASSWORD
        and others.filter(account_id=credential.account_id, kind=Credential.Kind.PASSWORD).exists()
    ):
        raise ApiError(409, "password credential already exists", "kind")
    if (
        credential.provider_id is not None
        and others.filter(provider=credential.provider, provider_id=credential.provider_id).exists()
    ):
        raise ApiError(409, "provider_id already exists", "new_provider_id")


@transaction.atomic
def update_credential(
    credential: Credential,
    *,
    kind: str = UNSET,
    provider: str = UNSET,
    status: str = UNSET,
    # the API's names for `provider_id` and `email` (docs/api.md#credentials)
    new_provider_id: str | None = UNSET,
    new_email: str | None = UNSET,
    last_used_at: datetime | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
    secret: str | None = None,
) -> Credential:
    """`secret` on a password credential sets the account's password (argon2, docs/api.md#credentials). A new
    password or a credential revoked ends every session of the account. No `actor`: the request's is
    recorded."""
    changes = sent(
        kind=kind,
        provider=provider,
        status=status,
        provider_id=new_provider_id,
        email=new_email,
        last_used_at=last_used_at,
        tags=tags,
        meta=meta,
    )
    if secret is not None and changes.get("kind", credential.kind) != Credential.Kind.PASSWORD:
        raise ApiError(400, "secret applies to password credentials only", "secret")
    account = credential.account
    if secret is not None:
        try:
            check_password_rules(secret, account)
        except ApiError as exc:
            raise ApiError(400, exc.message, "secret") from exc
    revoked = (
        changes.get("status") == Credential.Status.REVOKED and credential.status != Credential.Status.REVOKED
    )
    entry = audit.diff(credential, changes)
    fields = apply_changes(credential, changes)
    _check_credential_conflicts(credential)
    with unique_conflict(
        "provider_id already exists", "new_provider_id", check=lambda: _check_credential_conflicts(credential)
    ):
        credential.save(update_fields=fields)
    if entry:
        audit.record(
            "credential.update",
            resource=("credential", credential.pk),
            workspace_id=credential.workspace_id,
            changes=entry,
        )
    if secret is not None:
        set_password(account, secret)  # ends the sessions
    elif revoked:
        end_sessions(account)
    return credential


@transaction.atomic
def create_oauth_credential(
    account: Account,
    *,
    provider: str,
    provider_id: str,
    email: str | None,
    actor: Account | None,
    kind: str = Credential.Kind.OAUTH,
) -> Credential:
    """The active identity an OAuth provider vouched for (docs/api.md#oauth-login; kind `sso` for a
    workspace's own provider, docs/api.md#sso), in the root workspace (docs/api.md#the-root-workspace: no
    tenant holds an account's credential)."""
    return _add_credential(
        account,
        actor=actor,
        kind=kind,
        provider=provider,
        provider_id=provider_id,
        status=Credential.Status.ACTIVE,
        email=email,
    )


@transaction.atomic
def revoke_credentials(
    account: Account,
    *,
    except_: Credential | None = None,
    actor: Account | None,
    keep_sessions: bool = False,
) -> int:
    """Revokes every usable credential of the account but `except_`, each recorded as a `credential.update`;
    when any was revoked, every session of the account ends (as a revoke over the API does) unless the
    caller ends them itself (`keep_sessions`). Answers how many were revoked."""
    usable = (
        Credential.objects.select_for_update()
        .filter(account=account)
        .exclude(status=Credential.Status.REVOKED)
        .order_by("created_at", "id")
    )
    if except_ is not None:
        usable = usable.exclude(pk=except_.pk)
    revoked = list(usable)
    for credential in revoked:
        changes = {"status": {"before": credential.status, "after": Credential.Status.REVOKED}}
        audit.record(
            "credential.update",
            resource=("credential", credential.pk),
            workspace_id=credential.workspace_id,
            changes=changes,
            actor=actor,
        )
    Credential.objects.filter(pk__in=[credential.pk for credential in revoked]).update(
        status=Credential.Status.REVOKED, updated_at=timezone.now()
    )
    if revoked and not keep_sessions:
        end_sessions(account)
    return len(revoked)


def touch_credential(credential_id: uuid.UUID) -> None:
    """Marks a credential just used to sign in (`last_used_at`): one UPDATE, in the caller's transaction;
    bookkeeping, not an audited change (the sign-in records `account.login`)."""
    Credential.objects.filter(pk=credential_id).update(last_used_at=timezone.now())


@transaction.atomic
def delete_credential(credential: Credential) -> dict:
    """Deleting a usable credential ends the account's sessions, as revoking it does."""
    summary = {"id": str(credential.pk)}
    usable = credential.status != Credential.Status.REVOKED
    account = credential.account
    removed = audit.removed(credential, ("account_id", "kind", "provider", "status", "provider_id"))
    audit.record(
        "credential.delete",
        resource=("credential", credential.pk),
        workspace_id=credential.workspace_id,
        changes=removed,
    )
    credential.delete()
    if usable:
        end_sessions(account)
    return summary
