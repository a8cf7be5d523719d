"""The OAuth2 provider `idp_a` as a client sees it (docs/api.md#oauth-login): its configuration, the transport
rule for its URLs, and the code exchange that answers the user's profile."""

import contextlib
import ipaddress
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from oauthlib.oauth2 import WebApplicationClient
from requests_oauthlib import OAuth2Session

from accounts.models import normalize_email
from iam.http.fields import is_address
from iam.http.parsers import unstorable
from iam.platform import upstream

from .models import Credential

logger = logging.getLogger("authn.oauth")

# Their DEBUG lines carry the authorization code, the code_verifier and the provider's tokens.
for _name in ("requests_oauthlib", "oauthlib"):
    logging.getLogger(_name).setLevel(logging.INFO)

PROVIDER = Credential.Provider.IDP_A
PROVIDER_TIMEOUT_SECONDS = 5
INVALID_STATE = "invalid_state"  # docs/api.md#oauth-login
OAUTH_FAILED = "oauth_failed"


class OAuthFailure(Exception):
    """Ends the callback with a redirect carrying `error=<reason>`; `redirect_url` is the state's when it is
    known. The message is for the log only and never holds a code, state or token."""

    def __init__(self, reason: str, detail: str, redirect_url: str | None = None):
        super().__init__(detail)
        self.reason = reason
        self.redirect_url = redirect_url


@dataclass(frozen=True)
class ProviderConfig:
    client_id: str
    client_secret: str
    authorize_url: str
    token_url: str
    userinfo_url: str
    scope: list[str]

    @property
    def redirect_uri(self) -> str:
        return f"{settings.IAM_PUBLIC_URL}/auth/oauth/idp_a/callback"

    def session(self, **kwargs) -> OAuth2Session:
        session = OAuth2Session(
            client=WebApplicationClient(self.client_id),
            redirect_uri=self.redirect_uri,
            scope=self.scope,
            **kwargs,
        )
        session.mount("https://", _transport)
        session.mount("http://", _transport)
        return session


# The provider's calls keep to the request's network budget (docs/api.md#waiting-on-the-network), however
# slowly it answers.
_transport = upstream.DeadlineAdapter()


def provider_config() -> ProviderConfig | None:
    """The `IAM_IDP_A_*` settings, or None while any of the required ones is empty."""
    config = ProviderConfig(
        client_id=settings.IAM_IDP_A_CLIENT_ID,
        client_secret=settings.IAM_IDP_A_CLIENT_SECRET,
        authorize_url=settings.IAM_IDP_A_AUTHORIZE_URL,
        token_url=settings.IAM_IDP_A_TOKEN_URL,
        userinfo_url=settings.IAM_IDP_A_USERINFO_URL,
        scope=(settings.IAM_IDP_A_SCOPE or "openid email profile").split(),
    )
    urls = (config.authorize_url, config.token_url, config.userinfo_url)
    if not config.client_id or not all(urls):
        return None
    if not all(url.startswith("https://") or _is_loopback_http(url) for url in urls):
        logger.warning("oauth idp_a disabled: its URLs must use https (plain http only on loopback)")
        return None
    return config


def _is_loopback_http(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


_insecure_transport_lock = threading.Lock()


@contextlib.contextmanager
def transport_for(*urls: str) -> Iterator[None]:
    """oauthlib refuses plain http. A provider on loopback (tests, local development) is let through for
    the duration of the call; the variable is never set for any other URL."""
    if not all(_is_loopback_http(url) for url in urls):
        yield
        return
    with _insecure_transport_lock:
        previous = os.environ.get("OAUTHLIB_INSECURE_TRANSPORT")
        os.environ["OAUTHLIB_INSECURE_TRANSPORT"] = "1"
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("OAUTHLIB_INSECURE_TRANSPORT", None)
            else:
                os.environ["OAUTHLIB_INSECURE_TRANSPORT"] = previous


# The code exchange


@dataclass(frozen=True)
class Profile:
    sub: str
    email: str | None
    email_verified: bool
    name: str | None
    picture: str | None


def fetch_profile(config: ProviderConfig, *, code: str, code_verifier: str) -> Profile:
    """Exchanges the code (with the PKCE verifier) and reads the OpenID Connect user-info claims, the two
    calls within one network budget."""
    session = config.session()
    try:
        with transport_for(config.token_url, config.userinfo_url), upstream.budget():
            try:
                with upstream.call(PROVIDER_TIMEOUT_SECONDS) as seconds:
                    session.fetch_token(
                        config.token_url,
                        code=code,
                        client_secret=config.client_secret,
                        code_verifier=code_verifier,
                        timeout=seconds,
                    )
            except Warning as scope_changed:
                # oauthlib raises when the granted scope differs from the requested one (Google widens
                # `email` to a URL); the token rides on the warning.
                token = getattr(scope_changed, "token", None)
                if not token or "access_token" not in token:
                    raise
                session.token = token
            with upstream.call(PROVIDER_TIMEOUT_SECONDS) as seconds:
                response = session.get(config.userinfo_url, timeout=seconds)
                response.raise_for_status()
                claims = response.json()
    except (OSError, ValueError) as exc:  # requests' exceptions, a timeout, a spent budget
        raise OAuthFailure(OAUTH_FAILED, f"provider request failed: {type(exc).__name__}") from exc
    except Exception as exc:  # oauthlib's OAuth2Error family and Warning: the provider refused
        raise OAuthFailure(OAUTH_FAILED, f"token exchange failed: {type(exc).__name__}") from exc
    return _profile(claims)


# The claims this service reads: each may reach a column (the credential's `provider_id` and e-mail, the
# account's e-mail, name and avatar).
READ_CLAIMS = ("sub", "email", "email_verified", "name", "picture")


def _profile(claims: object) -> Profile:
    if not isinstance(claims, dict):
        raise OAuthFailure(OAUTH_FAILED, "user-info is not an object")
    # JSON lets a provider send "\u0000" or a lone "\ud800": no column can hold either (the query or the
    # insert would fail), so the answer is refused like any other malformed one.
    if any(isinstance(claims.get(name), str) and unstorable(claims[name]) for name in READ_CLAIMS):
        raise OAuthFailure(OAUTH_FAILED, "user-info holds NUL or a lone surrogate")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub or len(sub) > 255:
        raise OAuthFailure(OAUTH_FAILED, "user-info without a usable sub")
    email = claims.get("email")
    # An address by the service's one rule (a quoted local part is no usable e-mail: it could name a
    # domain the provider never vouched for), else none.
    email = normalize_email(email) if isinstance(email, str) and is_address(normalize_email(email)) else None
    verified = claims.get("email_verified")
    name = claims.get("name")
    picture = claims.get("picture")
    if isinstance(picture, str) and len(picture) <= 2048:
        try:
            URLValidator(schemes=["https", "http"])(picture)
        except ValidationError:
            picture = None
    else:
        picture = None
    return Profile(
        sub=sub,
        email=email,
        email_verified=email is not None and (verified is True or verified == "true"),
        name=(name.strip()[:255] or None) if isinstance(name, str) else None,
        picture=picture,
    )
