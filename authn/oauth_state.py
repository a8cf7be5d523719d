"""The OAuth2 login's single-use server-side state (docs/api.md#oauth-login): stored with its PKCE
verifier and redirect URL, consumed once; and the allowlist of redirect origins."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.utils import timezone
from oauthlib.oauth2 import WebApplicationClient

from iam.platform import crypto

from .models import OAuthState
from .oauth_provider import INVALID_STATE, PROVIDER, OAuthFailure, ProviderConfig, transport_for

STATE_LIFETIME = timedelta(minutes=10)  # docs/api.md#oauth-login


# Redirect URLs (docs/api.md#oauth-login: an allowlist of origins)


def _origin(url: str) -> tuple[str, str, int] | None:
    if any(char <= " " or char in "\\\x7f" for char in url):  # urlsplit would quietly drop some
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return None
    return scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80)


def redirect_allowed(url: str) -> bool:
    """Scheme, host and port must equal those of one allowlisted origin."""
    origin = _origin(url)
    return origin is not None and any(
        origin == _origin(allowed) for allowed in settings.IAM_OAUTH_REDIRECT_ALLOWLIST
    )


def fallback_redirect() -> str:
    """Where a failure goes when the state does not tell: the first allowlisted origin."""
    allowlist = settings.IAM_OAUTH_REDIRECT_ALLOWLIST
    return allowlist[0] if allowlist else settings.IAM_FRONTEND_URL


def with_query(url: str, params: dict[str, str]) -> str:
    """Adds `params` to the query of `url`, keeping the query and fragment it already has."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    return urlunsplit(parts._replace(query=urlencode([*query, *params.items()])))


# State


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


@dataclass(frozen=True)
class Started:
    """A login's fresh state, as the authorization URL carries it: the state, the PKCE S256 challenge and,
    for OpenID Connect, the nonce."""

    state: str
    code_challenge: str
    nonce: str | None


def begin(
    provider: str, *, redirect_url: str, connection_id=None, nonce: bool = False, signin_next: str = ""
) -> Started:
    """Stores a fresh state with its PKCE verifier (and nonce), both encrypted, for `provider`'s login:
    the one start of every login through a provider (idp_a, SSO connections). `signin_next`: a login the
    hosted sign-in page started, which goes on to that path of the service (`redirect_url` unused)."""
    state = secrets.token_urlsafe(32)
    client = WebApplicationClient("")
    verifier = client.create_code_verifier(64)
    challenge = client.create_code_challenge(verifier, "S256")
    nonce_value = secrets.token_urlsafe(32) if nonce else None
    now = timezone.now()
    # What a start stores ends with its state: one address's starts keep at most what its rate allows in
    # ten minutes (docs/security.md#throttling-and-enumeration).
    OAuthState.objects.filter(expires_at__lte=now).delete()
    OAuthState.objects.create(
        state_digest=_digest(state),
        provider=provider,
        redirect_url=redirect_url,
        code_verifier=crypto.encrypt(verifier),
        nonce=crypto.encrypt(nonce_value) if nonce_value else "",
        connection_id=connection_id,
        signin_next=signin_next,
        expires_at=now + STATE_LIFETIME,
    )
    return Started(state=state, code_challenge=challenge, nonce=nonce_value)


def initiate(config: ProviderConfig, *, redirect_url: str) -> str:
    """Stores a fresh state with its PKCE verifier and answers idp_a's authorization URL."""
    started = begin(PROVIDER, redirect_url=redirect_url)
    with transport_for(config.authorize_url):
        auth_url, _ = config.session().authorization_url(
            config.authorize_url,
            state=started.state,
            code_challenge=started.code_challenge,
            code_challenge_method="S256",
        )
    return auth_url


def consume_state(state: str | None, provider: str = PROVIDER) -> OAuthState:
    """Marks the state used, atomically: of two callbacks racing with one state, one wins. A state of
    another provider's login is unknown here."""
    if not state:
        raise OAuthFailure(INVALID_STATE, "state missing")
    digest = _digest(state)
    now = timezone.now()
    used = OAuthState.objects.filter(
        state_digest=digest, provider=provider, used_at__isnull=True, expires_at__gt=now
    ).update(used_at=now)
    row = OAuthState.objects.filter(state_digest=digest, provider=provider).first()
    if row is None:
        raise OAuthFailure(INVALID_STATE, "unknown state")
    if row.signin_next:  # the hosted sign-in page's: it goes back to the service, never to an app
        if not used:
            raise OAuthFailure(INVALID_STATE, "state expired or already used")
        return row
    redirect_url = row.redirect_url if redirect_allowed(row.redirect_url) else None
    if not used:
        raise OAuthFailure(INVALID_STATE, "state expired or already used", redirect_url)
    if redirect_url is None:
        raise OAuthFailure(INVALID_STATE, "redirect_url no longer allowed")
    return row


def started_from_signin(state: str | None, provider: str) -> bool:
    """Whether the hosted sign-in page started the login of this state (its callback then finishes in the
    browser session, docs/pages.md): read without consuming it."""
    if not state:
        return False
    return (
        OAuthState.objects.filter(state_digest=_digest(state), provider=provider)
        .exclude(signin_next="")
        .exists()
    )


def secret_of(row: OAuthState, field: str, failed: str) -> str:
    """The state's encrypted `code_verifier` or `nonce`, read back; unreadable: the login fails."""
    try:
        return crypto.decrypt(getattr(row, field))
    except crypto.InvalidToken as exc:
        raise OAuthFailure(failed, f"{field} unreadable") from exc
