"""What the OpenID Provider says about a person (docs/oidc.md#tokens): the ID token's claims, exactly those
listed, signed RS256 with the key the JWKS publishes (authn/keys.py), and the userinfo answer."""

import time

import jwt
from django.conf import settings

from accounts.models import Account
from authn import keys

from .models import Application

ID_TOKEN_LIFETIME = 3600  # seconds, as the access token's
SCOPES = ("openid", "profile", "email", "offline_access")
CLAIMS = (
    "iss",
    "sub",
    "aud",
    "azp",
    "exp",
    "iat",
    "auth_time",
    "nonce",
    "amr",
    "sid",
    "email",
    "email_verified",
    "name",
    "picture",
    "workspace_id",
)


def standard_claims(account: Account, scope: str) -> dict:
    """`sub` and the claims of the granted scopes (OpenID Connect Core 5.4)."""
    granted = scope.split()
    claims = {"sub": str(account.pk)}
    if "email" in granted:
        claims.update(email=account.email, email_verified=account.verified)
    if "profile" in granted:
        claims.update(name=account.name, picture=account.avatar_url)
    return claims


def id_token(account: Account, application: Application, session_claims: dict, *, nonce: str = "") -> str:
    """The ID token of the tokens whose access token carries `session_claims`: the same `sid`, `amr`,
    `auth_time` and workspace."""
    now = int(time.time())
    claims = {
        "iss": settings.IAM_PUBLIC_URL,
        "aud": application.client_id,
        "azp": application.client_id,
        "exp": now + ID_TOKEN_LIFETIME,
        "iat": now,
        "auth_time": session_claims["auth_time"],
        "amr": session_claims.get("amr", []),
        "sid": str(session_claims["sid"]),
        **standard_claims(account, session_claims.get("scope", "")),
    }
    if nonce:
        claims["nonce"] = nonce
    if "workspace_id" in session_claims:
        claims["workspace_id"] = session_claims["workspace_id"]
    return sign(claims)


def sign(claims: dict) -> str:
    private_key, headers = keys.signing_key("RS256")  # whatever IAM_JWT_ALGORITHM signs sessions with
    return jwt.encode(claims, private_key, algorithm="RS256", headers=headers)


def published_rs256_keys() -> list[dict]:
    """The JWKS's RS256 keys: those that verify an `id_token_hint`."""
    return [key for key in keys.published_keys() if key.get("alg") == "RS256"]
