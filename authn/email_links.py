"""The links the service e-mails to an address (docs/api.md#auth): asking for one
(`auth/reset-password`, `auth/resend-confirm`), and what a link proves: `auth/confirm` verifies the
address, `auth/update-password` sets the password of the account it was sent to."""

from django.db import transaction

from accounts.models import Account, normalize_email
from accounts.services import check_password_rules, set_password, update_account
from iam.http.errors import AUTHENTICATION_REQUIRED, ApiError

from . import emails, services, throttling, tokens
from .tokens import TokenError


def request_email(kind: str, *, email: str, ip: str) -> None:
    """`reset-password` and `resend-confirm`. Past the docs/api.md#throttling limit of requests from one
    client address, 429 before anything else. Otherwise known and unknown addresses take the same path: one
    account lookup, one throttle hit and one outbox insert in one transaction, which for an unknown,
    unmailable or throttled address is rolled back (`emails.enqueue`): no row, no task, the same time.
    The e-mail itself goes out after commit, in the worker, so neither answer waits for SMTP. Over the
    per-address limit nothing is sent and the answer is the same."""
    if retry_after := throttling.email_requests_by_ip.retry_after(ip):
        raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
    throttling.email_requests_by_ip.hit(ip)
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


def link_works(token: str, token_type: str) -> bool:
    """Whether `auth/confirm` or `auth/update-password` would take the link now, read without acting:
    opening a link shows its page, only the page's button acts (docs/pages.md#self-service-pages)."""
    try:
        claims = tokens.decode(token, types={token_type})
    except TokenError:
        return False
    account = Account.objects.filter(pk=claims["sub"], enabled=True).first()
    if account is None:
        return False
    return token_type != tokens.PASSWORD_RESET or claims["sv"] == account.session_version


@transaction.atomic
def confirm_email(*, token: str) -> Account:
    """Verifies the account and activates its pending password credential (docs/security.md#tokens).
    Idempotent: a valid token of a verified account answers the same. The session version is not compared, so
    ending sessions does not void a confirmation link still on its way."""
    account, _ = _account_for(token, tokens.ACCOUNT_CONFIRM)
    if not account.verified:
        update_account(account, verified=True, actor=account)
    services.activate_pending_password(account)
    return account


@transaction.atomic
def update_password(*, token: str, password: str) -> Account:
    """Sets the password a reset link was sent for. The token carries the session version it was issued
    under; setting the password bumps it, so the link works once (docs/security.md#tokens), and the account
    row lock makes two concurrent uses of one link succeed at most once. The link proves the mailbox, so the
    password then signs in: the account's password credential is made active, or added for an account
    that had none (made by a provider, SSO or SCIM); and an account that was never verified is reclaimed
    (`reclaim_account`: verified, and what an earlier holder set up removed)."""
    account, claims = _account_for(token, tokens.PASSWORD_RESET)
    if claims["sv"] != account.session_version:
        raise ApiError(401, AUTHENTICATION_REQUIRED)
    check_password_rules(password, account)
    if not account.verified:
        services.reclaim_account(account, password=password, actor=account)
        return account
    set_password(account, password)
    services.activate_password_credential(account, actor=account)
    return account
