"""Sessions are JWT pairs bound to the account's session version (CONTRACT 5)."""

import uuid
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth.models import update_last_login
from django.db import transaction
from django.utils import timezone

from accounts.account_cache import get_account
from accounts.models import Account
from accounts.services import end_sessions
from iam import audit, cache

from . import tokens
from .models import RefreshToken
from .tokens import TokenError


def issue_session(account: Account, *, auth_time: int | None = None) -> dict:
    """A new token pair. `auth_time` is the login that started the session (now, for a login); a refresh
    passes the one its token carries, and no token of the session outlives it by more than the refresh
    lifetime (CONTRACT 5), however often it is refreshed."""
    now = timezone.now()
    if auth_time is None:
        auth_time = int(now.timestamp())
    session_end = datetime.fromtimestamp(auth_time, tz=UTC) + settings.IAM_REFRESH_TOKEN_LIFETIME
    if session_end <= now:
        raise TokenError("token_expired")
    common = {"session_version": account.session_version, "auth_time": auth_time, "not_after": session_end}
    access_token, _ = tokens.issue(
        account.pk, type=tokens.ACCESS, lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME, **common
    )
    refresh_token, expires_at = tokens.issue(
        account.pk,
        type=tokens.REFRESH,
        lifetime=settings.IAM_REFRESH_TOKEN_LIFETIME,
        jti=(jti := uuid.uuid4()),
        **common,
    )
    RefreshToken.objects.create(jti=jti, account=account, expires_at=expires_at)
    return {"access_token": access_token, "refresh_token": refresh_token}


def start_session(account: Account) -> dict:
    """The session a sign-in starts (a password login, a registration, an OAuth callback): a new token
    pair, and the account's `last_login` set as Django's own `login()` sets it for the admin (its
    `user_logged_in` receiver, `update_last_login`, called here without a request). A refresh continues
    a session and leaves `last_login` as it was."""
    session = issue_session(account)
    update_last_login(None, account)
    return session


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
    if not account.enabled:  # said before the revocation that the disable also made (CONTRACT 4)
        raise TokenError("account_disabled")
    if claims["sv"] != account.session_version:
        raise TokenError("token_revoked")
    return account


def refresh(account: Account, claims: dict) -> dict:
    """`/auth/refresh`: an access token gets a new pair of the same session; a refresh token is rotated."""
    if claims["type"] == tokens.ACCESS:
        return issue_session(account, auth_time=claims["auth_time"])
    return rotate(account, claims)


def rotate(account: Account, claims: dict) -> dict:
    """Exchanges a refresh token for a new pair. A refresh token presented a second time means it leaked:
    every session of the account ends (RFC 9700 4.14). The reuse is committed even though the request
    answers 401: it runs in a transaction of its own, outside the request's."""
    with transaction.atomic():
        row = RefreshToken.objects.select_for_update().filter(jti=claims["jti"], account=account).first()
        if row is not None and row.used_at is None:
            row.used_at = timezone.now()
            row.save(update_fields=["used_at"])
            return issue_session(account, auth_time=claims["auth_time"])
    if row is None:
        raise TokenError("invalid_token")
    with transaction.atomic():
        audit.record("session.refresh_reuse", resource=("account", account.pk), actor=account)
        end_sessions(account)  # kept: the caller commits before refusing (`ApiError(commit=True)`)
    raise TokenError("token_revoked")
