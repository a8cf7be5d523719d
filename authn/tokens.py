"""JWTs (docs/security.md#tokens): one algorithm accepted, the issuer checked, every claim required, and the
`type` checked against what the caller expects, so a reset token never opens an API call."""

import uuid
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import jwt
from django.conf import settings
from django.utils import timezone

from . import keys

ACCESS = "access"
REFRESH = "refresh"
PASSWORD_RESET = "PasswordReset"
ACCOUNT_CONFIRM = "AccountConfirm"
MEMBERSHIP_INVITE = "MembershipInvite"
# docs/api.md#second-factor-totp: the `mfa_token` between a first factor and the second
MFA_CHALLENGE = "MfaChallenge"

REQUIRED_CLAIMS = ["sub", "type", "sv", "iat", "exp", "jti", "iss"]
SESSION_TYPES = frozenset({ACCESS, REFRESH})

# Tokens issued to an application (docs/security.md#application-tokens) name it (`aud`, `azp`: its
# client_id), the scope granted and the workspace signed in to; those of another workspace's application
# also carry APP_WORKSPACE_CLAIM, the one workspace where they count: this API answers them 401, and only
# that workspace's clients validate them. A refresh keeps them all.
APP_WORKSPACE_CLAIM = "app_workspace"
APPLICATION_CLAIMS = ("aud", "azp", "scope", "workspace_id", APP_WORKSPACE_CLAIM)


class TokenError(Exception):
    def __init__(self, reason: str):  # "invalid_token" | "token_expired"
        super().__init__(reason)
        self.reason = reason


class Signed(NamedTuple):
    token: str
    expires_at: datetime
    claims: dict  # as signed: `sub`, `jti` and `sid` strings, where `decode` answers UUIDs


def issue(account_id: uuid.UUID, **claims: Any) -> tuple[str, datetime]:
    """A token and its expiry, signed by `sign` (which says what each keyword claims)."""
    token, expires_at, _ = sign(account_id, **claims)
    return token, expires_at


def sign(
    account_id: uuid.UUID,
    *,
    type: str,
    session_version: int,
    lifetime: timedelta,
    jti: uuid.UUID | None = None,
    auth_time: int | None = None,
    not_after: datetime | None = None,
    extra: dict | None = None,
) -> Signed:
    """A token, its expiry and its claims as signed: a caller that says what a token it issued carries
    reads them here instead of decoding the token again. `auth_time` (session tokens,
    docs/security.md#tokens): when the login that started the session happened. `not_after` caps the
    expiry (a session never outlives its login by more than the refresh lifetime)."""
    now = timezone.now()
    expires_at = now + lifetime if not_after is None else min(now + lifetime, not_after)
    claims = {
        "sub": str(account_id),
        "type": type,
        "sv": session_version,
        "iat": int(now.timestamp()),
        "exp": int(expires_at.timestamp()),
        "jti": str(jti or uuid.uuid4()),
        "iss": settings.IAM_JWT_ISSUER,
        **(extra or {}),
    }
    if auth_time is not None:
        claims["auth_time"] = auth_time
    key, headers = keys.signing_key()
    token = jwt.encode(claims, key, algorithm=settings.IAM_JWT_ALGORITHM, headers=headers)
    return Signed(token, expires_at, claims)


def decode(token: str, *, types: set[str] | frozenset[str]) -> dict:
    try:
        claims = jwt.decode(
            token,
            keys.verification_key(token),
            algorithms=[settings.IAM_JWT_ALGORITHM],
            issuer=settings.IAM_JWT_ISSUER,
            # `aud` is checked below: only an application's tokens have one, and PyJWT refuses any `aud`
            # when no audience is expected.
            options={"require": REQUIRED_CLAIMS, "verify_aud": False},
        )
    except jwt.ExpiredSignatureError as exc:
        raise TokenError("token_expired") from exc
    except jwt.PyJWTError as exc:
        raise TokenError("invalid_token") from exc
    if claims.get("type") not in types or not isinstance(claims.get("sv"), int):
        raise TokenError("invalid_token")
    if claims["type"] in SESSION_TYPES and not isinstance(claims.get("auth_time"), int):
        # docs/security.md#tokens: every session token carries its login time
        raise TokenError("invalid_token")
    # docs/api.md#sessions: a session token names its session and how the login was made; tokens issued before
    # sessions were records have neither, and stay bound to the session version alone.
    amr = claims.get("amr")
    if amr is not None and not (isinstance(amr, list) and all(isinstance(item, str) for item in amr)):
        raise TokenError("invalid_token")
    if not all(isinstance(claims.get(name, ""), str) for name in APPLICATION_CLAIMS):
        raise TokenError("invalid_token")
    try:
        claims["sub"] = uuid.UUID(str(claims["sub"]))
        claims["jti"] = uuid.UUID(str(claims["jti"]))
        if "sid" in claims:
            if not isinstance(claims["sid"], str):
                raise ValueError("sid")
            claims["sid"] = uuid.UUID(claims["sid"])
    except ValueError as exc:
        raise TokenError("invalid_token") from exc
    return claims
