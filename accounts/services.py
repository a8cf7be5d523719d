from typing import Any

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from iam.http.errors import ApiError
from iam.http.fields import is_address
from iam.platform import audit, events
from iam.platform.service_helpers import UNSET, apply_changes, sent

from .account_cache import forget_account
from .models import Account, normalize_email


def check_password_rules(password: str, account: Account | None = None) -> None:
    """docs/api.md#validation: Django's validators; the message names the rule broken."""
    try:
        validate_password(password, account)
    except ValidationError as exc:
        code = exc.error_list[0].code
        messages = {
            "password_too_short": "password must have at least 8 characters",
            "password_too_common": "password is too common",
        }
        raise ApiError(400, messages.get(code, exc.messages[0].lower().rstrip(".")), "password") from exc


def email_taken(email: str) -> bool:
    return Account.objects.filter(email=normalize_email(email)).exists()


def create_account(
    *,
    email: str,
    name: str,
    password: str | None,
    description: str | None = None,
    avatar_url: str | None = None,
    tags: list[str] | None = None,
    meta: dict | None = None,
    verified: bool = False,
    is_superuser: bool = False,
    actor: Account | None = None,
) -> Account:
    """Creates the account row only; `authn.services.create_password_account` adds its credential. The
    address is held to the one rule (`iam.http.fields.is_address`) whatever door it came through."""
    if not is_address(normalize_email(email)):
        raise ApiError(400, "invalid email", "email")
    account = Account(
        email=normalize_email(email),
        name=name,
        description=description,
        avatar_url=avatar_url,
        tags=tags or [],
        meta=meta or {},
        verified=verified,
        is_superuser=is_superuser,
        created_by=actor,
    )
    if password is None:
        account.set_unusable_password()
    else:
        account.set_password(password)
    account.save(force_insert=True)
    audit.record(
        "account.create",
        resource=("account", account.pk),
        changes=audit.created(account, ("email", "name", "verified", "is_superuser")),
        actor=actor,
    )
    return account


@transaction.atomic
def update_account(
    account: Account,
    *,
    actor: Account | None,
    name: str = UNSET,
    description: str | None = UNSET,
    avatar_url: str | None = UNSET,
    enabled: bool = UNSET,
    verified: bool = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Account:
    changes = sent(
        name=name,
        description=description,
        avatar_url=avatar_url,
        enabled=enabled,
        verified=verified,
        tags=tags,
        meta=meta,
    )
    flags_changed = any(
        flag in changes and changes[flag] != getattr(account, flag) for flag in ("enabled", "verified")
    )
    disabling = enabled is False and account.enabled
    entry = audit.diff(account, changes)
    account.save(update_fields=apply_changes(account, {**changes, "updated_by": actor}))
    if entry:
        audit.record("account.update", resource=("account", account.pk), changes=entry, actor=actor)
    forget_account(account.pk)
    if disabling:
        # docs/api.md#authorization: tokens issued before a disable stay dead once the account is enabled
        # again.
        end_sessions(account)
    if flags_changed:
        events.emit("account.updated", resource=("account", account.pk), account_ids=[account.pk])
    return account


@transaction.atomic
def set_operator(account: Account, *, operator: bool, actor: Account | None) -> Account:
    """Grants or withdraws operator status (docs/operations.md#the-admin-and-management-commands; no API sets
    it). It changes what the account may do everywhere, so cached copies go and the clients hear
    `account.updated` (docs/integration.md#push-events)."""
    if account.is_superuser == operator:
        return account
    audit.record(
        "account.update",
        resource=("account", account.pk),
        changes={"is_superuser": {"before": account.is_superuser, "after": operator}},
        actor=actor,
    )
    account.is_superuser = operator
    account.updated_by = actor
    account.save(update_fields=["is_superuser", "updated_by"])
    forget_account(account.pk)
    events.emit("account.updated", resource=("account", account.pk), account_ids=[account.pk])
    return account


@transaction.atomic
def clear_password(account: Account, *, actor: Account | None) -> None:
    """Leaves the account without a usable password (it signs in through its other credentials only) and
    ends every session, as a new password does (docs/security.md#tokens)."""
    account.set_unusable_password()
    account.save(update_fields=["password"])
    audit.record("account.password_clear", resource=("account", account.pk), actor=actor)
    end_sessions(account)


@transaction.atomic
def set_password(account: Account, password: str) -> None:
    """A new password ends every session (docs/security.md#tokens)."""
    account.set_password(password)
    account.save(update_fields=["password"])
    audit.record("account.password_set", resource=("account", account.pk))
    end_sessions(account)


@transaction.atomic
def end_sessions(account: Account) -> int:
    """Increments the session version in the database: every token issued before fails from now on. The
    bump and its `session.revoked` events commit together (docs/integration.md#push-events)."""
    Account.objects.filter(pk=account.pk).update(session_version=F("session_version") + 1)
    account.refresh_from_db(fields=["session_version"])
    audit.record(
        "session.revoke",
        resource=("account", account.pk),
        changes={
            "session_version": {"before": account.session_version - 1, "after": account.session_version}
        },
    )
    forget_account(account.pk)
    events.emit("session.revoked", resource=("account", account.pk), account_ids=[account.pk])
    return account.session_version


@transaction.atomic
def delete_account(account: Account, *, actor: Account | None) -> dict:
    summary = {"id": str(account.pk), "email": account.email}
    account_id = account.pk
    audit.record(
        "account.delete",
        resource=("account", account.pk),
        changes=audit.removed(account, ("email", "name")),
        actor=actor,
    )
    # Resolved before the delete: the memberships that name the workspaces go with the account.
    events.emit("account.deleted", resource=("account", account.pk), account_ids=[account_id])
    account.delete()  # docs/api.md#validation: memberships and credentials cascade
    forget_account(account_id)
    return summary
