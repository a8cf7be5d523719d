"""OAuth2 login with the external provider `idp_a` (SPEC 4 rules 3-6, CONTRACT 10): authorization code
with PKCE S256, a single-use server-side state, and the rules that create or link an account."""

import contextlib
import hashlib
import ipaddress
import logging
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone
from oauthlib.oauth2 import WebApplicationClient
from requests_oauthlib import OAuth2Session

from accounts.models import Account, normalize_email
from accounts.services import clear_password, create_account, update_account
from iam import audit, crypto

from . import services
from .models import Credential, OAuthState
from .sessions import issue_session

logger = logging.getLogger(__name__)

# Their DEBUG lines carry the authorization code, the code_verifier and the provider's tokens.
for _name in ("requests_oauthlib", "oauthlib"):
    logging.getLogger(_name).setLevel(logging.INFO)

PROVIDER = Credential.Provider.IDP_A
STATE_LIFETIME = timedelta(minutes=10)  # SPEC 4 rule 3
PROVIDER_TIMEOUT_SECONDS = 5
INVALID_STATE = "invalid_state"  # SPEC 4 rule 5
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
        return OAuth2Session(
            client=WebApplicationClient(self.client_id),
            redirect_uri=self.redirect_uri,
            scope=self.scope,
            **kwargs,
        )


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


# Redirect URLs (CONTRACT 10: an allowlist of origins)


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
def _transport_for(*urls: str) -> Iterator[None]:
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


def initiate(config: ProviderConfig, *, redirect_url: str) -> str:
    """Stores a fresh state with its PKCE verifier and answers the provider's authorization URL."""
    state = secrets.token_urlsafe(32)
    client = WebApplicationClient(config.client_id)
    verifier = client.create_code_verifier(64)
    challenge = client.create_code_challenge(verifier, "S256")
    now = timezone.now()
    OAuthState.objects.filter(expires_at__lt=now - STATE_LIFETIME).delete()
    OAuthState.objects.create(
        state_digest=_digest(state),
        provider=PROVIDER,
        redirect_url=redirect_url,
        code_verifier=crypto.encrypt(verifier),
        expires_at=now + STATE_LIFETIME,
    )
    with _transport_for(config.authorize_url):
        auth_url, _ = config.session().authorization_url(
            config.authorize_url, state=state, code_challenge=challenge, code_challenge_method="S256"
        )
    return auth_url


def consume_state(state: str | None) -> OAuthState:
    """Marks the state used, atomically: of two callbacks racing with one state, one wins."""
    if not state:
        raise OAuthFailure(INVALID_STATE, "state missing")
    digest = _digest(state)
    now = timezone.now()
    used = OAuthState.objects.filter(
        state_digest=digest, provider=PROVIDER, used_at__isnull=True, expires_at__gt=now
    ).update(used_at=now)
    row = OAuthState.objects.filter(state_digest=digest, provider=PROVIDER).first()
    if row is None:
        raise OAuthFailure(INVALID_STATE, "unknown state")
    redirect_url = row.redirect_url if redirect_allowed(row.redirect_url) else None
    if not used:
        raise OAuthFailure(INVALID_STATE, "state expired or already used", redirect_url)
    if redirect_url is None:
        raise OAuthFailure(INVALID_STATE, "redirect_url no longer allowed")
    return row


# Talking to the provider


@dataclass(frozen=True)
class Profile:
    sub: str
    email: str | None
    email_verified: bool
    name: str | None
    picture: str | None


def fetch_profile(config: ProviderConfig, *, code: str, code_verifier: str) -> Profile:
    """Exchanges the code (with the PKCE verifier) and reads the OpenID Connect user-info claims."""
    session = config.session()
    try:
        with _transport_for(config.token_url, config.userinfo_url):
            try:
                session.fetch_token(
                    config.token_url,
                    code=code,
                    client_secret=config.client_secret,
                    code_verifier=code_verifier,
                    timeout=PROVIDER_TIMEOUT_SECONDS,
                )
            except Warning as scope_changed:
                # oauthlib raises when the granted scope differs from the requested one (Google widens
                # `email` to a URL); the token rides on the warning.
                token = getattr(scope_changed, "token", None)
                if not token or "access_token" not in token:
                    raise
                session.token = token
            response = session.get(config.userinfo_url, timeout=PROVIDER_TIMEOUT_SECONDS)
        response.raise_for_status()
        claims = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise OAuthFailure(OAUTH_FAILED, f"provider request failed: {type(exc).__name__}") from exc
    except Exception as exc:  # oauthlib's OAuth2Error family and Warning: the provider refused
        raise OAuthFailure(OAUTH_FAILED, f"token exchange failed: {type(exc).__name__}") from exc
    return _profile(claims)


def _profile(claims: object) -> Profile:
    if not isinstance(claims, dict):
        raise OAuthFailure(OAUTH_FAILED, "user-info is not an object")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub or len(sub) > 255:
        raise OAuthFailure(OAUTH_FAILED, "user-info without a usable sub")
    email = claims.get("email")
    if isinstance(email, str) and len(email) <= 254:
        try:
            validate_email(email)
            email = normalize_email(email)
        except ValidationError:
            email = None
    else:
        email = None
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


# Accounts (CONTRACT 10)


def _oauth_credential(account: Account, profile: Profile) -> Credential:
    return services.create_oauth_credential(
        account, provider=PROVIDER, provider_id=profile.sub, email=profile.email, actor=account
    )


def _link(account: Account, profile: Profile) -> Credential:
    """Links a verified provider e-mail to the account holding it. An unverified account may have been
    registered by someone who does not own the address (pre-registration hijack): the provider's word
    verifies it, and whatever that someone holds ends: the password, every other credential (an identity
    whose provider did not vouch for the address included) and every session."""
    audit.record(
        "account.link", resource=("account", account.pk), changes={"provider": PROVIDER}, actor=account
    )
    if not account.verified:
        update_account(account, verified=True, actor=None)
        services.revoke_credentials(account, actor=account, keep_sessions=True)
        clear_password(account, actor=account)  # ends every session
    return _oauth_credential(account, profile)


@transaction.atomic
def sign_in(profile: Profile) -> Account:
    """Finds, links or creates the account of `profile` and answers it, enabled, with its credential's
    `last_used_at` set."""
    credential = (
        Credential.objects.select_for_update()
        .select_related("account")
        .filter(kind=Credential.Kind.OAUTH, provider=PROVIDER, provider_id=profile.sub)
        .first()
    )
    if credential is not None:
        account = credential.account
        if credential.status != Credential.Status.ACTIVE:
            raise OAuthFailure(OAUTH_FAILED, "oauth credential not active")
    else:
        if profile.email is None:
            raise OAuthFailure(OAUTH_FAILED, "user-info without a usable e-mail")
        account = Account.objects.select_for_update().filter(email=profile.email).first()
        if account is not None:
            if not profile.email_verified:
                raise OAuthFailure(OAUTH_FAILED, "unverified provider e-mail matches an account")
            credential = _link(account, profile)
        else:
            account = create_account(
                email=profile.email,
                name=profile.name or profile.email.split("@", 1)[0],
                password=None,
                verified=profile.email_verified,
                avatar_url=profile.picture,
            )
            credential = _oauth_credential(account, profile)
    if not account.enabled:  # raised inside the transaction: a link just made is undone
        raise OAuthFailure(OAUTH_FAILED, "account disabled")
    services.touch_credential(credential)
    audit.record(
        "account.login", resource=("account", account.pk), changes={"provider": PROVIDER}, actor=account
    )
    return account


def complete(params: dict[str, str]) -> str:
    """The callback: answers the URL to redirect the browser to, with the session's tokens or an
    `error` (SPEC 4 rules 4-5)."""
    redirect_url = None
    try:
        config = provider_config()
        try:
            state = consume_state(params.get("state"))
        except OAuthFailure as failure:
            if config is None:
                raise OAuthFailure(OAUTH_FAILED, "provider not configured", failure.redirect_url) from None
            raise
        redirect_url = state.redirect_url
        if config is None:
            raise OAuthFailure(OAUTH_FAILED, "provider not configured")
        if params.get("error") or not params.get("code"):
            raise OAuthFailure(OAUTH_FAILED, "provider answered without a code")
        try:
            verifier = crypto.decrypt(state.code_verifier)
        except crypto.InvalidToken as exc:
            raise OAuthFailure(OAUTH_FAILED, "code_verifier unreadable") from exc
        profile = fetch_profile(config, code=params["code"], code_verifier=verifier)
        try:
            account = sign_in(profile)
        except IntegrityError as exc:  # a concurrent callback created the same account or credential
            raise OAuthFailure(OAUTH_FAILED, "concurrent sign-in") from exc
        with transaction.atomic():
            session = issue_session(account)
    except OAuthFailure as failure:
        logger.info("oauth idp_a callback failed: %s (%s)", failure.reason, failure)
        target = failure.redirect_url or redirect_url or fallback_redirect()
        return with_query(target, {"error": failure.reason})
    return with_query(redirect_url, session)
