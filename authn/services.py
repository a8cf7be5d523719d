import hashlib
import uuid
from typing import Any

from django.contrib.auth.hashers import check_password, make_password
from django.db import transaction
from django.db.models import F, FilteredRelation, Q
from django.utils import timezone

from accounts.models import Account, normalize_email
from accounts.services import (
    check_password_rules,
    clear_password,
    create_account,
    email_taken,
    set_password,
    update_account,
)
from iam.http.errors import ApiError
from iam.http.fields import is_address
from iam.platform import audit, cache, metrics
from iam.platform.service_helpers import apply_changes, unique_conflict

from . import emails, keys, mfa, throttling
from .credentials import _add_credential, revoke_credentials, touch_credential
from .models import Credential, Session, SigningKey
from .sessions import open_browser_session, replace_browser_session, start_session

INVALID_CREDENTIALS = "invalid credentials"  # docs/api.md#errors

_dummy_hash: str | None = None


def _burn_password_check(password: str) -> None:
    """Verifies against a throw-away hash so that an unknown e-mail costs what a wrong password costs
    (docs/security.md#throttling-and-enumeration: no enumeration by timing)."""
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
    """An account with a local password credential, `pending` until the e-mail is confirmed
    (docs/security.md#tokens). Used by registration, `accounts/create`, the admin and `bootstrap`. Credentials
    live in the root workspace only (docs/api.md#the-root-workspace): no tenant holds an account's
    credential."""
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
            conflict_status=400,  # docs/api.md#errors keeps 400 for register
        )
        session = start_session(account, amr=["pwd"], ip=ip, user_agent=user_agent)  # RFC 8176: a password
        emails.enqueue(emails.CONFIRM, account.pk)  # docs/api.md#auth
    # counts towards the docs/api.md#throttling 3 e-mails an hour
    throttling.emails_by_address.hit(account.email)
    return account, session


def sign_up(*, email: str, password: str, name: str, ip: str) -> None:
    """`/signup` (docs/pages.md#self-service-pages): an account as `auth/register` makes it (its password
    credential `pending`, a confirmation link mailed), without signing in. The answer tells nothing: an
    address that already has an account gets the same page, and an e-mail saying so; both paths hash the
    password once, and mail only within the address's hourly limit. The registration limit per client
    address is `auth/register`'s, counted together."""
    if retry_after := throttling.registrations_by_ip.take(ip):
        raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
    check_password_rules(password)
    email = normalize_email(email)
    throttled = throttling.emails_by_address.retry_after(email) is not None
    throttling.emails_by_address.hit(email)
    with transaction.atomic():
        if not email_taken(email):
            try:
                account = create_password_account(
                    email=email, password=password, name=name, conflict_status=400
                )
            except ApiError:  # registered meanwhile (the unique index): told as below
                pass
            else:
                emails.enqueue(emails.CONFIRM, account.pk)
                return
        make_password(password)  # what creating the account costs
        account = Account.objects.filter(email=email).first()
        wanted = not throttled and account is not None and account.enabled
        emails.enqueue(emails.ACCOUNT_EXISTS, account.pk if wanted else None)


def login(
    *, email: str, password: str, ip: str, user_agent: str, browser: bool = False
) -> tuple[Account, Any]:
    email = normalize_email(email)
    found = _refuse_throttled(email, ip)
    # One statement reads what a login decides on: the account, its password credential and whether it
    # holds a second factor (docs/performance.md#what-keeps-the-hot-paths-fast). The e-mail is unique: no
    # ORDER BY (`first()`'s) to compile.
    account = next(iter(_LOGIN_ACCOUNTS.filter(email=email)[:1]), None)
    credential_id = _password_credential(account, email, password, ip=ip)
    if not account.enabled:
        _login_refused("disabled", email, account)
        raise ApiError(403, "account disabled", commit=True)
    if throttling.login_failures_by_email.counted(email, found):  # else one round trip less
        throttling.login_failures_by_email.reset(email)
    # No savepoint: inside the endpoint's transaction an error here rolls the whole request back anyway,
    # and a caller without one (the hosted pages) gets its own transaction.
    with transaction.atomic(savepoint=False):
        touch_credential(credential_id)
        if mfa.holds_second_factor(account):  # the password was the first factor; no session yet
            return account, mfa.challenge_answer(account, amr=["pwd"])
        start = open_browser_session if browser else start_session  # `browser`: a Session, no tokens
        session = start(account, amr=["pwd"], ip=ip, user_agent=user_agent)
        audit.record("account.login", resource=("account", account.pk), actor=account)
    metrics.LOGINS.labels("ok").inc()
    return account, session


# What `login` reads with the account: its password credential (`_password_credential`; an account has at
# most one, `credential_one_password`, so the join adds no row) and its second factors
# (`mfa.holds_second_factor`). Annotated once, as DRF's `GenericAPIView.queryset` is: each login filters a
# clone, without resolving the annotations again.
_LOGIN_ACCOUNTS = Account.objects.annotate(
    password_credential=FilteredRelation(
        "credentials", condition=Q(credentials__kind=Credential.Kind.PASSWORD)
    )
).annotate(
    password_credential_id=F("password_credential__id"),
    password_credential_status=F("password_credential__status"),
    **mfa.second_factor_annotations(),
)


def _refuse_throttled(email: str, ip: str) -> dict:
    """429 before any password check, past the login failures of the address or of the client
    (docs/api.md#throttling); else the counters read (`throttling.read`)."""
    checks = ((throttling.login_failures_by_email, email), (throttling.login_failures_by_ip, ip))
    found = throttling.read(*checks)
    retry_after = throttling.longest_retry_after(*checks, found=found)
    if retry_after:
        _login_refused("throttled", email, ip=ip)
        raise ApiError(
            429, "too many failed login attempts", headers={"Retry-After": str(retry_after)}, commit=True
        )
    return found


def _password_credential(account: Account | None, email: str, password: str, *, ip: str) -> uuid.UUID:
    """The id of the account's password credential when `password` is its password and the credential is
    not revoked; else the failure is counted and recorded, and 401 `invalid credentials`. The credential
    is read with the account when `login` annotated it (`_LOGIN_ACCOUNTS`)."""
    if account is None or not account.has_usable_password():
        _burn_password_check(password)
        valid = False
    else:
        valid = account.check_password(password)  # upgrades the hash when its parameters changed
    credential = None
    if valid and hasattr(account, "password_credential_status"):
        if account.password_credential_id is not None:
            credential = (account.password_credential_id, account.password_credential_status)
    elif valid:
        credential = (
            Credential.objects.filter(account=account, kind=Credential.Kind.PASSWORD)
            .values_list("pk", "status")
            .first()
        )
    if credential is None or credential[1] == Credential.Status.REVOKED:
        throttling.login_failures_by_email.hit(email)
        throttling.login_failures_by_ip.hit(ip)
        _login_refused("invalid", email, account)
        raise ApiError(401, INVALID_CREDENTIALS, commit=True)  # the refusal's audit entry stands
    return credential[0]


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


# The signed-in person's own page, `/account` (docs/pages.md#the-account-page)


def _prove_own_password(session: Session, password: str, *, ip: str) -> Account:
    """The browser session's account types its password again: the same throttles, refusal and record as
    a login's (`_refuse_throttled`, `_password_credential`), counted against its address."""
    account = session.account
    _refuse_throttled(account.email, ip)
    _password_credential(account, account.email, password, ip=ip)
    throttling.login_failures_by_email.reset(account.email)
    return account


def _renewed(session: Session, *, ip: str, user_agent: str) -> Session:
    """A browser session for a person who just proved their password again: signed in now (its
    `auth_time`), with what the session they had proved besides (`amr`, the SSO workspace)."""
    amr = [*session.amr, *(["pwd"] if "pwd" not in session.amr else [])]
    return open_browser_session(
        session.account,
        amr=amr,
        ip=ip,
        user_agent=user_agent,
        sso_workspace_id=session.sso_workspace_id,
    )


def confirm_password(session: Session, password: str, *, ip: str, user_agent: str) -> Session:
    """Recent authentication by password (docs/security.md#second-factors-and-the-workspace-mfa-policy):
    the person signs in again without leaving the page. A new browser session (`auth_time` now) replaces
    `session`; the applications' sessions go on under it."""
    account = _prove_own_password(session, password, ip=ip)
    with transaction.atomic():
        renewed = _renewed(session, ip=ip, user_agent=user_agent)
        replace_browser_session(session, renewed, actor=account)
        audit.record(
            "account.login", resource=("account", account.pk), changes={"amr": renewed.amr}, actor=account
        )
    return renewed


def change_password(
    session: Session, *, current_password: str, new_password: str, ip: str, user_agent: str
) -> Session:
    """A signed-in person's new password: the current one proves them (a login's throttles), the new
    one meets docs/api.md#validation's rules (400 naming the rule, field `password`). As with every new
    password, every session of the account ends (docs/security.md#tokens), the browser's and the
    applications' included; this browser goes on in a new session, answered for its cookie."""
    account = _prove_own_password(session, current_password, ip=ip)
    check_password_rules(new_password, account)
    with transaction.atomic():
        set_password(account, new_password)  # every session ends
        return _renewed(session, ip=ip, user_agent=user_agent)


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
    """docs/api.md#invitations: a disabled account accepts no invitation, whatever proves the mailbox."""
    if not account.enabled:
        raise ApiError(403, ACCOUNT_DISABLED)


@transaction.atomic
def invited_account(
    email: str,
    *,
    password: str | None,
    name: str | None,
    ip: str | None,
    user_agent: str,
    browser: bool = False,
) -> tuple[Account, Any]:
    """The account that accepts an invitation mailed to `email`, whose link the caller holds (it proves the
    mailbox), with a new session when it had to be made or reclaimed (docs/api.md#invitations):
    - a verified account: as it is, no new session;
    - none: created verified, with `password` and `name`;
    - one never verified (someone may have registered the address without the mailbox): `password`
      becomes its password and the hijack defence runs (`reclaim_account`: what that someone set up,
      second factors included, is removed).
    The new session's `amr` is `pwd`: the password just set, with the mailbox the link proves. Like every
    door that starts a session, it asks an account that holds a second factor for it: the answer is then
    `mfa_required` and an `mfa_token` instead of the session. `browser`: the hosted invitation page's
    account, whose session is a browser session (no tokens)."""
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
    start = open_browser_session if browser else start_session
    return account, start(account, amr=["pwd"], ip=ip, user_agent=user_agent)


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
