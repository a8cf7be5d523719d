import hashlib
from datetime import datetime
from typing import Any

from django.contrib.auth.hashers import check_password, make_password
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, normalize_email
from accounts.services import (
    check_password_rules,
    clear_password,
    create_account,
    email_taken,
    end_sessions,
    set_password,
    update_account,
)
from iam import audit, cache, metrics
from iam.errors import ApiError
from iam.fields import is_address
from iam.service_helpers import UNSET, apply_changes, sent, unique_conflict
from tenancy.workspace_cache import root_workspace

from . import emails, keys, mfa, throttling
from .models import Credential, SigningKey
from .sessions import open_browser_session, start_session

INVALID_CREDENTIALS = "invalid credentials"  # SPEC 7

_dummy_hash: str | None = None


def _burn_password_check(password: str) -> None:
    """Verifies against a throw-away hash so that an unknown e-mail costs what a wrong password costs
    (CONTRACT 13: no enumeration by timing)."""
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = make_password("timing-equaliser")
    check_password(password, _dummy_hash)


@transaction.atomic
def create_password_account(
    *,
    email: str,
    password: str,
    name: str,
    conflict_status: int = 409,
    actor: Account | None = None,
    **fields,
) -> Account:
    """An account with a local password credential, `pending` until the e-mail is confirmed (CONTRACT 5).
    Used by registration, `accounts/create`, the admin and `bootstrap`. Credentials live in the root
    workspace only (CONTRACT 3): no tenant holds an account's credential."""
    if email_taken(email):
        raise ApiError(conflict_status, "email already exists", "email")
    check_password_rules(password)
    # A registration racing this one past the check above gets the check's answer, not a 500.
    with unique_conflict("email already exists", "email", status=conflict_status):
        account = create_account(email=email, name=name, password=password, actor=actor, **fields)
    _add_credential(
        account,
        actor=actor,
        kind=Credential.Kind.PASSWORD,
        provider=Credential.Provider.LOCAL,
        status=Credential.Status.PENDING,
        email=account.email,
    )
    return account


def _add_credential(account: Account, *, actor: Account | None, **fields: Any) -> Credential:
    """A credential of the account, in the root workspace (CONTRACT 3: no tenant holds an account's
    credential), recorded with each field given."""
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


def register(
    *, email: str, password: str, name: str | None, ip: str, user_agent: str
) -> tuple[Account, dict]:
    """A new account signed in. Past `IAM_REGISTRATIONS_PER_IP_PER_HOUR` requests from the client
    address within the hour, 429 before anything else (counted first, so the limit holds however many
    arrive at once)."""
    if retry_after := throttling.registrations_by_ip.take(ip):
        raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
    with transaction.atomic():
        account = create_password_account(
            email=email,
            password=password,
            name=name or normalize_email(email).split("@", 1)[0],
            conflict_status=400,  # SPEC 7 keeps 400 for register
        )
        session = start_session(account, amr=["pwd"], ip=ip, user_agent=user_agent)  # RFC 8176: a password
        emails.enqueue(emails.CONFIRM, account.pk)  # SPEC 4 rule 2
    throttling.emails_by_address.hit(account.email)  # counts towards CONTRACT 13's 3 e-mails an hour
    return account, session


def login(
    *, email: str, password: str, ip: str, user_agent: str, browser: bool = False
) -> tuple[Account, Any]:
    email = normalize_email(email)
    retry_after = max(
        throttling.login_failures_by_email.retry_after(email) or 0,
        throttling.login_failures_by_ip.retry_after(ip) or 0,
    )
    if retry_after:
        _login_refused("throttled", email, ip=ip)
        raise ApiError(
            429, "too many failed login attempts", headers={"Retry-After": str(retry_after)}, commit=True
        )

    account = Account.objects.filter(email=email).first()
    if account is None or not account.has_usable_password():
        _burn_password_check(password)
        valid = False
    else:
        valid = account.check_password(password)  # upgrades the hash when its parameters changed
    credential = (
        Credential.objects.filter(account=account, kind=Credential.Kind.PASSWORD).first() if valid else None
    )
    if not valid or credential is None or credential.status == Credential.Status.REVOKED:
        throttling.login_failures_by_email.hit(email)
        throttling.login_failures_by_ip.hit(ip)
        _login_refused("invalid", email, account)
        raise ApiError(401, INVALID_CREDENTIALS, commit=True)  # the refusal's audit entry stands
    if not account.enabled:
        _login_refused("disabled", email, account)
        raise ApiError(403, "account disabled", commit=True)
    throttling.login_failures_by_email.reset(email)
    with transaction.atomic():
        touch_credential(credential)
        if mfa.has_second_factor(account):  # the password was the first factor; no session yet
            return account, mfa.challenge_answer(account, amr=["pwd"])
        start = open_browser_session if browser else start_session  # `browser`: a Session, no tokens
        session = start(account, amr=["pwd"], ip=ip, user_agent=user_agent)
        audit.record("account.login", resource=("account", account.pk), actor=account)
    metrics.LOGINS.labels("ok").inc()
    return account, session


def _login_refused(outcome: str, email: str, account: Account | None = None, *, ip: str = "") -> None:
    """Counted, and recorded with the actor unknown: the address tried (only when it is one: a password
    typed into the e-mail field must not reach the log) and the account when there is one. A throttled
    attempt costs no password check, so it is recorded once a minute per address and client at most,
    lest a flood of refused attempts fill the table."""
    metrics.LOGINS.labels(outcome).inc()
    if outcome == "throttled":
        seen = hashlib.sha256(f"{email}|{ip}".encode()).hexdigest()[:32]
        if not cache.add(f"audit:throttled:{seen}", 1, 60):
            return
    if not is_address(email):
        email = "(not an e-mail address)"
    action = "account.login_throttled" if outcome == "throttled" else "account.login_failed"
    changes = {"email": email} if outcome == "throttled" else {"email": email, "reason": outcome}
    audit.record(action, resource=("account", account.pk if account else None), changes=changes)


def activate_pending_password(account: Account) -> None:
    """A registration's `pending` password credential made active: the address is proven."""
    if Credential.objects.filter(
        account=account, kind=Credential.Kind.PASSWORD, status=Credential.Status.PENDING
    ).update(status=Credential.Status.ACTIVE, updated_at=timezone.now()):
        audit.record("credential.activate", resource=("account", account.pk), actor=account)


@transaction.atomic
def reclaim_account(account: Account, *, password: str | None, actor: Account | None) -> None:
    """The pre-registration hijack defence (docs/security.md#consent-nobody-is-put-into-a-workspace): the
    owner of the mailbox has proved it (a provider's verified e-mail, an invitation's or a reset's link,
    a workspace's SSO or SCIM within its verified domain) for an account that was never verified, which
    anyone could have registered with the address. The account becomes verified, and whatever that
    someone set up ends: every credential (each revocation recorded), the password, every second factor
    with its recovery codes (`mfa.remove_second_factors`), and every session. `password`: the owner's new
    one (an active password credential then), else the account is left without one."""
    update_account(account, verified=True, actor=None)
    revoke_credentials(account, actor=actor, keep_sessions=True)
    mfa.remove_second_factors(account, actor=actor, reason="reclaimed")
    if password is None:
        clear_password(account, actor=actor)  # ends every session
        return
    set_password(account, password)  # ends every session
    activate_password_credential(account, actor=actor)


def activate_password_credential(account: Account, *, actor: Account | None) -> None:
    """The account's password credential made active, for a password the owner of the mailbox just set
    (a reset, a reclaim): one is added when the account had none (it came from a provider, SSO or
    SCIM); one revoked or pending, holding a password set before, now holds the new one."""
    credential = (
        Credential.objects.select_for_update().filter(account=account, kind=Credential.Kind.PASSWORD).first()
    )
    if credential is None:
        _add_credential(
            account,
            actor=actor,
            kind=Credential.Kind.PASSWORD,
            provider=Credential.Provider.LOCAL,
            status=Credential.Status.ACTIVE,
            email=account.email,
        )
        return
    changes = {"status": Credential.Status.ACTIVE}
    entry = audit.diff(credential, changes)
    credential.save(update_fields=apply_changes(credential, changes))
    if entry:
        audit.record(
            "credential.update",
            resource=("credential", credential.pk),
            workspace_id=credential.workspace_id,
            changes=entry,
            actor=actor,
        )


ACCOUNT_DISABLED = "account disabled"


def require_enabled(account: Account) -> None:
    """CONTRACT 15: a disabled account accepts no invitation, whatever proves the mailbox."""
    if not account.enabled:
        raise ApiError(403, ACCOUNT_DISABLED)


@transaction.atomic
def invited_account(
    email: str, *, password: str | None, name: str | None, ip: str | None, user_agent: str
) -> tuple[Account, dict | None]:
    """The account that accepts an invitation mailed to `email`, whose link the caller holds (it proves the
    mailbox), with a new session when it had to be made or reclaimed (CONTRACT 15):
    - a verified account: as it is, no new session;
    - none: created verified, with `password` and `name`;
    - one never verified (someone may have registered the address without the mailbox): `password`
      becomes its password and the hijack defence runs (`reclaim_account`: what that someone set up,
      second factors included, is removed).
    The new session's `amr` is `pwd`: the password just set, with the mailbox the link proves. Like every
    door that starts a session, it asks an account that holds a second factor for it: the answer is then
    `mfa_required` and an `mfa_token` instead of the session."""
    account = Account.objects.select_for_update().filter(email=normalize_email(email)).first()
    if account is not None:
        require_enabled(account)
        if account.verified:
            return account, None
    if not password:
        raise ApiError(400, "password required", "password")
    if account is None:
        if not name:
            raise ApiError(400, "name required", "name")
        account = create_password_account(email=email, password=password, name=name, verified=True)
        activate_pending_password(account)
    else:
        check_password_rules(password, account)
        reclaim_account(account, password=password, actor=account)
    if mfa.has_second_factor(account):
        return account, mfa.challenge_answer(account, amr=["pwd"])
    return account, start_session(account, amr=["pwd"], ip=ip, user_agent=user_agent)


# Credentials (SPEC 4, CONTRACT 6 and 12). No create: registration and OAuth make them.


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
    new_provider_id: str | None = UNSET,  # the API's names for `provider_id` and `email` (SPEC 4)
    new_email: str | None = UNSET,
    last_used_at: datetime | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
    secret: str | None = None,
) -> Credential:
    """`secret` on a password credential sets the account's password (argon2, CONTRACT 12). A new password
    or a credential revoked ends every session of the account. No `actor`: the request's is recorded."""
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
    """The active identity an OAuth provider vouched for (CONTRACT 10; kind `sso` for a workspace's own
    provider, CONTRACT 18), in the root workspace (CONTRACT 3: no tenant holds an account's credential)."""
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


@transaction.atomic
def touch_credential(credential: Credential) -> None:
    """Marks a credential just used to sign in (`last_used_at`); bookkeeping, not an audited change (the
    sign-in records `account.login`)."""
    Credential.objects.filter(pk=credential.pk).update(last_used_at=timezone.now())


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


# Signing keys (RS256, and the asymmetric IAM_JWT_ALGORITHM)


@transaction.atomic
def rotate_signing_key(*, actor: Account | None = None) -> list[SigningKey]:
    """A new key signs from now on for each algorithm the service signs with (RS256, and
    IAM_JWT_ALGORITHM's when it is asymmetric); the retired ones stay published until the last token they
    signed has expired (`IAM_REFRESH_TOKEN_DAYS`), then drop out of the JWKS document and verify nothing.
    Each recorded as `signing_key.rotate` (the key ids, never a key), the admin's with its operator as the
    actor."""
    rotated = []
    for algorithm in keys.published_algorithms():
        current = SigningKey.objects.select_for_update().filter(algorithm=algorithm, retired_at__isnull=True)
        retired = sorted(current.values_list("kid", flat=True))
        current.update(retired_at=timezone.now())
        key = keys.new_key(algorithm)
        audit.record(
            "signing_key.rotate",
            resource=("signing_key", None),  # a key's id is its thumbprint, not a UUID: it is in `changes`
            changes={"kid": {"before": retired, "after": key.kid}, "algorithm": algorithm},
            actor=actor,
        )
        rotated.append(key)
    keys.changed()
    return rotated
