"""An SSO connection's OpenID Connect provider as a client sees it (docs/api.md#sso): discovery, the
authorization URL, the code exchange and the ID token's checks. Every request to the provider goes
through the address guard of push deliveries (`iam.platform.egress`, docs/security.md#the-edges). The protocol
is the libraries': oauthlib builds the authorization URL and the token request and reads the token answer,
PyJWT's `PyJWKClient` reads the provider's keys and `jwt.decode` checks the ID token."""

import base64
import hmac
import http.client
import json
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import jwt
from django.conf import settings
from oauthlib.oauth2 import WebApplicationClient

from authn.oauth_provider import OAuthFailure, Profile, _is_loopback_http, _profile, transport_for
from iam.platform import egress

SSO_FAILED = "sso_failed"
TIMEOUT_SECONDS = 5
DISCOVERY_PATH = "/.well-known/openid-configuration"
SCOPE = ["openid", "email", "profile"]
# Asymmetric algorithms only: an HS256 ID token would be keyed with the client secret, which the provider
# and every holder of the secret share.
ID_TOKEN_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]
CLOCK_SKEW_SECONDS = 60


class DiscoveryFailed(Exception):
    """The reason words the 400 `issuer discovery failed: <reason>`."""


def redirect_uri() -> str:
    return f"{settings.IAM_PUBLIC_URL}/auth/sso/callback"


def _secure(url: object) -> bool:
    """https, or plain http on loopback (tests, local development): the rule of idp_a's URLs."""
    return isinstance(url, str) and (url.startswith("https://") or _is_loopback_http(url))


def _get_json(url: str) -> tuple[int, Any]:
    status, body = egress.fetch("GET", url, timeout=TIMEOUT_SECONDS)
    return status, json.loads(body)


@dataclass(frozen=True)
class Discovered:
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str
    token_auth_methods: list[str]


def discover(issuer: str) -> Discovered:
    """Reads `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 section 4): its
    `issuer` must equal the one given, and its endpoints must be https (plain http only on loopback)."""
    if not _secure(issuer) or urlsplit(issuer).query or urlsplit(issuer).fragment:
        raise DiscoveryFailed("issuer must be an https url without query or fragment")
    url = issuer.rstrip("/") + DISCOVERY_PATH
    try:
        status, document = _get_json(url)
    except egress.EndpointRefused as exc:
        raise DiscoveryFailed(f"address not allowed ({exc})") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise DiscoveryFailed(f"provider unreachable ({type(exc).__name__})") from exc
    except ValueError as exc:
        raise DiscoveryFailed("the document is not json") from exc
    if status != 200:
        raise DiscoveryFailed(f"the provider answered {status}")
    if not isinstance(document, dict):
        raise DiscoveryFailed("the document is not a json object")
    if document.get("issuer") != issuer:
        raise DiscoveryFailed("the document names another issuer")
    endpoints = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(name)
        if not _secure(value) or len(value) > 2048:
            raise DiscoveryFailed(f"{name} missing or not https")
        endpoints[name] = value
    userinfo = document.get("userinfo_endpoint") or ""
    if userinfo and (not _secure(userinfo) or len(userinfo) > 2048):
        raise DiscoveryFailed("userinfo_endpoint not https")
    methods = document.get("token_endpoint_auth_methods_supported")
    if not isinstance(methods, list) or not all(isinstance(item, str) for item in methods):
        methods = ["client_secret_basic"]  # the specification's default
    return Discovered(**endpoints, userinfo_endpoint=userinfo, token_auth_methods=methods[:16])


@dataclass(frozen=True)
class ProviderConfig:
    """What a login needs of a connection, read from it once."""

    issuer: str
    client_id: str
    client_secret: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str
    token_auth_methods: list[str]


def authorization_url(config: ProviderConfig, *, state: str, code_challenge: str, nonce: str) -> str:
    client = WebApplicationClient(config.client_id)
    with transport_for(config.authorization_endpoint):
        return client.prepare_request_uri(
            config.authorization_endpoint,
            redirect_uri=redirect_uri(),
            scope=SCOPE,
            state=state,
            code_challenge=code_challenge,
            code_challenge_method="S256",
            nonce=nonce,
        )


# The code exchange and the ID token


def _basic(client_id: str, client_secret: str) -> str:
    """RFC 6749 2.3.1: each part form-encoded, then base64."""
    pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def exchange_code(config: ProviderConfig, *, code: str, code_verifier: str) -> dict:
    """The token endpoint's answer to the code (with the PKCE verifier): its `id_token` and
    `access_token`."""
    client = WebApplicationClient(config.client_id)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    secret_post = (
        "client_secret_basic" not in config.token_auth_methods
        and "client_secret_post" in config.token_auth_methods
    )
    if secret_post:
        body = client.prepare_request_body(
            code=code,
            redirect_uri=redirect_uri(),
            code_verifier=code_verifier,
            include_client_id=True,
            client_secret=config.client_secret,
        )
    else:
        body = client.prepare_request_body(
            code=code, redirect_uri=redirect_uri(), code_verifier=code_verifier, include_client_id=False
        )
        headers["Authorization"] = _basic(config.client_id, config.client_secret)
    try:
        status, answer = egress.fetch(
            "POST", config.token_endpoint, body=body.encode(), headers=headers, timeout=TIMEOUT_SECONDS
        )
        with transport_for(config.token_endpoint):
            token = client.parse_request_body_response(answer.decode())
    except egress.EndpointRefused as exc:
        raise OAuthFailure(SSO_FAILED, f"token endpoint refused: {exc}") from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise OAuthFailure(SSO_FAILED, f"token request failed: {type(exc).__name__}") from exc
    except Exception as exc:  # oauthlib's OAuth2Error family and Warning: the provider refused
        raise OAuthFailure(SSO_FAILED, f"token exchange failed: {type(exc).__name__}") from exc
    if status != 200 or not isinstance(token.get("id_token"), str):
        raise OAuthFailure(SSO_FAILED, f"token endpoint answered {status} without an id_token")
    return dict(token)


class GuardedJWKClient(jwt.PyJWKClient):
    """PyJWT's JWKS client, reading the keys through the address guard instead of urllib."""

    def fetch_data(self) -> Any:
        try:
            status, data = _get_json(self.uri)
        except (egress.EndpointRefused, OSError, http.client.HTTPException, ValueError) as exc:
            raise jwt.PyJWKClientConnectionError(f"jwks unreachable: {type(exc).__name__}") from exc
        if status != 200 or not isinstance(data, dict):
            raise jwt.PyJWKClientError(f"jwks answered {status}")
        if hasattr(self, "_last_successful_fetch"):
            self._last_successful_fetch = time.monotonic()
        return data


class _JwksClients:
    """One JWKS client per `jwks_uri` per process: each keeps the provider's keys five minutes and reads
    them again for a key id it does not know (a rotation)."""

    LIMIT = 256

    def __init__(self):
        self.lock = threading.Lock()
        self.clients: dict[str, GuardedJWKClient] = {}

    def get(self, uri: str) -> GuardedJWKClient:
        with self.lock:
            client = self.clients.get(uri)
            if client is None:
                if len(self.clients) >= self.LIMIT:
                    self.clients.clear()
                client = self.clients[uri] = GuardedJWKClient(uri, lifespan=300, timeout=TIMEOUT_SECONDS)
            return client


jwks_clients = _JwksClients()


def check_id_token(config: ProviderConfig, id_token: str, *, nonce: str) -> dict:
    """OpenID Connect Core 3.1.3.7: the signature against the provider's published keys, `iss`, `aud`
    (and `azp` when several audiences), `exp`, `iat` and the login's `nonce`."""
    try:
        key = jwks_clients.get(config.jwks_uri).get_signing_key_from_jwt(id_token)
        claims = jwt.decode(
            id_token,
            key=key,
            algorithms=ID_TOKEN_ALGORITHMS,
            audience=config.client_id,
            issuer=config.issuer,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["iss", "aud", "exp", "iat", "sub"]},
        )
    except jwt.PyJWTError as exc:
        raise OAuthFailure(SSO_FAILED, f"id_token refused: {type(exc).__name__}") from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != config.client_id:
        raise OAuthFailure(SSO_FAILED, "id_token for several audiences without our azp")
    if not isinstance(claims.get("nonce"), str) or not _equal(claims["nonce"], nonce):
        raise OAuthFailure(SSO_FAILED, "id_token nonce mismatch")
    return claims


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _userinfo(config: ProviderConfig, access_token: str) -> dict:
    try:
        status, claims = egress.fetch(
            "GET",
            config.userinfo_endpoint,
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=TIMEOUT_SECONDS,
        )
        claims = json.loads(claims)
    except (egress.EndpointRefused, OSError, http.client.HTTPException, ValueError) as exc:
        raise OAuthFailure(SSO_FAILED, f"user-info request failed: {type(exc).__name__}") from exc
    if status != 200 or not isinstance(claims, dict):
        raise OAuthFailure(SSO_FAILED, f"user-info answered {status}")
    return claims


def fetch_profile(config: ProviderConfig, *, code: str, code_verifier: str, nonce: str) -> Profile:
    """The signed-in user as the checked ID token says, completed from the user-info endpoint when the ID
    token carries no e-mail (providers put the `email` scope's claims there), whose `sub` must then be
    the ID token's (OpenID Connect Core 5.3.2)."""
    token = exchange_code(config, code=code, code_verifier=code_verifier)
    claims = check_id_token(config, token["id_token"], nonce=nonce)
    if "email" not in claims and config.userinfo_endpoint and isinstance(token.get("access_token"), str):
        extra = _userinfo(config, token["access_token"])
        if extra.get("sub") != claims["sub"]:
            raise OAuthFailure(SSO_FAILED, "user-info names another sub")
        claims = {**extra, **{key: claims[key] for key in ("sub", "iss", "aud")}}
    try:
        return _profile(claims)
    except OAuthFailure as failure:
        raise OAuthFailure(SSO_FAILED, str(failure)) from None
