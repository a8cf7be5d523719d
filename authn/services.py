from django.contrib.auth.hashers import check_password, make_password
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, normalize_email
from accounts.services import check_password_rules, create_account, email_taken
from iam.errors import ApiError
from tenancy.models import Workspace

from . import throttling
from .models import Credential
from .sessions import issue_session

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
