from django.contrib.auth.hashers import check_password, make_password
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, normalize_email
from accounts.services import (
    check_password_rules,
    create_account,
    email_taken,
    set_password,
    update_account,
)
from iam.errors import AUTHENTICATION_REQUIRED, ApiError
from tenancy.models import Workspace

from . import emails, throttling, tokens
from .models import Credential
from .sessions import issue_session
from .tokens import TokenError

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
    workspace: Workspace,
    conflict_status: int = 409,
    actor: Account | None = None,
    **fields,
) -> Account:
    """An account with a local password credential, `pending` until the e-mail is confirmed (CONTRACT 5).
    Used by registration and by `accounts/create`."""
    if email_taken(email):
        raise ApiError(conflict_status, "email already exists", "email")
    check_password_rules(password)
    account = create_account(email=email, name=name, password=password, actor=actor, **fields)
    Credential.objects.create(
        account=account,
        workspace=workspace,
        kind=Credential.Kind.PASSWORD,
        provider=Credential.Provider.LOCAL,
        status=Credential.Status.PENDING,
        email=account.email,
    )
    return account


def register(*, email: str, password: str, name: str | None, workspace: Workspace) -> tuple[Account, dict]:
    with transaction.atomic():
        account = create_password_account(
            email=email,
            password=password,
            name=name or normalize_email(email).split("@", 1)[0],
            workspace=workspace,
            conflict_status=400,  # SPEC 7 keeps 400 for register
        )
        session = issue_session(account)
        emails.enqueue(emails.CONFIRM, account.pk)  # SPEC 4 rule 2
    throttling.emails_by_address.hit(account.email)  # counts towards CONTRACT 13's 3 e-mails an hour
    return account, session


def login(*, email: str, password: str, ip: str) -> tuple[Account, dict]:
    email = normalize_email(email)
    retry_after = max(
        throttling.login_failures_by_email.retry_after(email) or 0,
        throttling.login_failures_by_ip.retry_after(ip) or 0,
    )
    if retry_after:
        raise ApiError(429, "too many failed login attempts", headers={"Retry-After": str(retry_after)})

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
        raise ApiError(401, INVALID_CREDENTIALS)
    if not account.enabled:
        raise ApiError(403, "account disabled")
    throttling.login_failures_by_email.reset(email)
    with transaction.atomic():
        Credential.objects.filter(pk=credential.pk).update(last_used_at=timezone.now())
        session = issue_session(account)
    return account, session


# E-mail flows (SPEC 4 rules 1-2, CONTRACT 5, 9, 13)


def request_email(kind: str, *, email: str) -> None:
    """`reset-password` and `resend-confirm`. Known and unknown addresses take the same path: one account
    lookup, one throttle hit and one outbox row in one transaction (a row with no account sends nothing).
    The e-mail itself goes out after commit, in the worker, so neither answer waits for SMTP and the two
    cannot be told apart by timing. Over CONTRACT 13's limit nothing is sent and the answer is the same."""
    email = normalize_email(email)
    throttled = throttling.emails_by_address.retry_after(email) is not None
    throttling.emails_by_address.hit(email)
    with transaction.atomic():
        account = Account.objects.filter(email=email).first()
        wanted = not throttled and emails.should_send(kind, account)
        emails.enqueue(kind, account.pk if wanted else None)


def _account_for(token: str, token_type: str) -> tuple[Account, dict]:
    """The enabled account a special-purpose token names, locked for the change it authorizes."""
    try:
        claims = tokens.decode(token, types={token_type})
    except TokenError as exc:
        raise ApiError(401, AUTHENTICATION_REQUIRED) from exc
    account = Account.objects.select_for_update().filter(pk=claims["sub"]).first()
    if account is None or not account.enabled:
        raise ApiError(401, AUTHENTICATION_REQUIRED)
    return account, claims


@transaction.atomic
def confirm_email(*, token: str) -> Account:
    """Verifies the account and activates its pending password credential (CONTRACT 5). Idempotent: a
    valid token of a verified account answers the same. The session version is not compared, so ending
    sessions does not void a confirmation link still on its way."""
    account, _ = _account_for(token, tokens.ACCOUNT_CONFIRM)
    if not account.verified:
        update_account(account, changes={"verified": True}, actor=account)
    Credential.objects.filter(
        account=account, kind=Credential.Kind.PASSWORD, status=Credential.Status.PENDING
    ).update(status=Credential.Status.ACTIVE, updated_at=timezone.now())
    return account


@transaction.atomic
def update_password(*, token: str, password: str) -> Account:
    """Sets the password a reset link was sent for. The token carries the session version it was issued
    under; setting the password bumps it, so the link works once (CONTRACT 5), and the account row lock
    makes two concurrent uses of one link succeed at most once."""
    account, claims = _account_for(token, tokens.PASSWORD_RESET)
    if claims["sv"] != account.session_version:
        raise ApiError(401, AUTHENTICATION_REQUIRED)
    check_password_rules(password, account)
    set_password(account, password)
    return account
