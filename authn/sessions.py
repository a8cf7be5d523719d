"""Sessions are JWT pairs bound to the account's session version (CONTRACT 5)."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from accounts.services import end_sessions
from accounts.state import get_account
from iam import cache

from . import tokens
from .models import RefreshToken
from .tokens import TokenError


def issue_session(account: Account) -> dict:
    refresh = RefreshToken.objects.create(
        account=account, expires_at=timezone.now() + settings.IAM_REFRESH_TOKEN_LIFETIME
    )
    access_token, _ = tokens.issue(
        account.pk,
        type=tokens.ACCESS,
        session_version=account.session_version,
        lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME,
    )
    refresh_token, _ = tokens.issue(
        account.pk,
        type=tokens.REFRESH,
        session_version=account.session_version,
        lifetime=settings.IAM_REFRESH_TOKEN_LIFETIME,
        jti=refresh.jti,
    )
    return {"access_token": access_token, "refresh_token": refresh_token}


def authenticate_token(
    token: str, *, types: frozenset[str] = frozenset({tokens.ACCESS})
) -> tuple[Account, dict]:
    """Decodes and checks a token against the account's current state: the hot path of every
    authenticated request and of `clients/validate`, free of queries while the account is cached."""
    claims = tokens.decode(token, types=types)
    return check_session(claims), claims


def check_session(claims: dict, *, read: object = cache.MISSING) -> Account:
    """The account of decoded claims, when the session they carry is still current. `read` is the cached
    entry a caller already fetched with others in one round trip."""
    account = get_account(claims["sub"], read=read)
    if account is None:
        raise TokenError("invalid_token")
    if claims["sv"] != account.session_version:
        raise TokenError("token_revoked")
    if not account.enabled:
        raise TokenError("account_disabled")
    return account


def rotate(account: Account, claims: dict) -> dict:
    """Exchanges a refresh token for a new pair. A refresh token presented a second time means it leaked:
    every session of the account ends (RFC 9700 4.14)."""
    with transaction.atomic():
        row = RefreshToken.objects.select_for_update().filter(jti=claims["jti"], account=account).first()
        if row is not None and row.used_at is None:
            row.used_at = timezone.now()
            row.save(update_fields=["used_at"])
            return issue_session(account)
    if row is None:
        raise TokenError("invalid_token")
    with transaction.atomic():
        end_sessions(account)  # kept: the caller commits before refusing (`ApiError(commit=True)`)
    raise TokenError("token_revoked")
