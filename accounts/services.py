from typing import Unpack

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from iam import audit, events
from iam.errors import ApiError
from iam.service_helpers import Described, save_changes, save_new, strict

from .account_cache import forget_account
from .models import Account, normalize_email

UPDATABLE = ("name", "description", "avatar_url", "enabled", "verified", "tags", "meta")


class AccountChanges(Described, total=False):
    avatar_url: str | None
    enabled: bool
    verified: bool


def check_password_rules(password: str, account: Account | None = None) -> None:
    """CONTRACT 12: Django's validators; the message names the rule broken."""
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
    """Creates the account row only; `authn.services.create_password_account` adds its credential."""
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
    save_new(account, audited=("email", "name", "verified", "is_superuser"), actor=actor)
    return account


@strict
@transaction.atomic
def update_account(account: Account, *, actor: Account | None, **changes: Unpack[AccountChanges]) -> Account:
    flags_changed = any(
        name in changes and changes[name] != getattr(account, name) for name in ("enabled", "verified")
    )
    disabling = changes.get("enabled") is False and account.enabled
    save_changes(
        account,
        {**changes, "updated_by": actor},
        fields=(*UPDATABLE, "updated_by"),
        audited=UPDATABLE,
        actor=actor,
    )
    forget_account(account.pk)
    if disabling:
        # CONTRACT 4: tokens issued before a disable stay dead once the account is enabled again.
        end_sessions(account)
    if flags_changed:
        events.emit_for(account, "updated", account_ids=[account.pk])
    return account


@transaction.atomic
def set_operator(account: Account, *, operator: bool, actor: Account | None) -> Account:
    """Grants or withdraws operator status (CONTRACT 14; no API sets it). It changes what the account may
    do everywhere, so cached copies go and the clients hear `account.updated` (CONTRACT 8)."""
    if account.is_superuser == operator:
        return account
    audit.record_for(
        account,
        "update",
        changes={"is_superuser": {"before": account.is_superuser, "after": operator}},
        actor=actor,
    )
    account.is_superuser = operator
    account.updated_by = actor
    account.save(update_fields=["is_superuser", "updated_by"])
    forget_account(account.pk)
    events.emit_for(account, "updated", account_ids=[account.pk])
    return account


@transaction.atomic
def clear_password(account: Account, *, actor: Account | None) -> None:
    """Leaves the account without a usable password (it signs in through its other credentials only) and
    ends every session, as a new password does (CONTRACT 5)."""
    account.set_unusable_password()
    account.save(update_fields=["password"])
    audit.record_for(account, "password_clear", actor=actor)
    end_sessions(account)


@transaction.atomic
def set_password(account: Account, password: str) -> None:
    """A new password ends every session (CONTRACT 5)."""
    account.set_password(password)
    account.save(update_fields=["password"])
    audit.record_for(account, "password_set")
    end_sessions(account)


@transaction.atomic
def end_sessions(account: Account) -> int:
    """Increments the session version in the database: every token issued before fails from now on. The
    bump and its `session.revoked` events commit together (CONTRACT 8)."""
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
    audit.record_for(account, "delete", changes=audit.removed(account, ("email", "name")), actor=actor)
    # Resolved before the delete: the memberships that name the workspaces go with the account.
    events.emit_for(account, "deleted", account_ids=[account_id])
    account.delete()  # CONTRACT 6: memberships and credentials cascade
    forget_account(account_id)
    return summary
