"""Login through an outside provider: `idp_a` (docs/api.md#oauth-login) and the SSO connections of
workspaces (docs/api.md#sso, `sso.login`) share the callback and the rules that create or link an account.
The idp_a provider client is `oauth_provider`, the state of every login `oauth_state`."""

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from accounts.models import Account
from accounts.services import create_account
from iam.platform import audit

from . import mfa, services
from .credentials import create_oauth_credential, touch_credential
from .models import Credential, OAuthState, Session
from .oauth_provider import (
    INVALID_STATE,
    OAUTH_FAILED,
    PROVIDER,
    OAuthFailure,
    Profile,
    fetch_profile,
    provider_config,
)
from .oauth_state import consume_state, fallback_redirect, secret_of, with_query
from .sessions import open_browser_session, start_session

logger = logging.getLogger(__name__)


# Accounts (docs/api.md#oauth-login, #sso for the SSO connections of workspaces)


@dataclass(frozen=True)
class Identity:
    """Who a provider says signed in, and how the credential names them: `kind`/`provider`/`provider_id`
    (`oauth`/`idp_a`/`<sub>`, or `sso`/`idp_b`/`<connection id>:<sub>`). `email_trusted`: whether the
    provider's e-mail may find or create an account at all (an SSO connection's only within its verified
    domains); `failed` is the error the login fails with. `admits_operators`: False for a tenant's own
    provider, which never links or signs in a platform operator (docs/security.md#enterprise-sso-linking)."""

    kind: str
    provider: str
    provider_id: str
    profile: Profile
    failed: str = OAUTH_FAILED
    email_trusted: bool = True
    admits_operators: bool = True


def _require_admitted(account: Account, identity: Identity) -> None:
    if account.is_superuser and not identity.admits_operators:
        raise OAuthFailure(identity.failed, "an operator's account is not signed in by a tenant's provider")


def _credential(account: Account, identity: Identity) -> Credential:
    return create_oauth_credential(
        account,
        kind=identity.kind,
        provider=identity.provider,
        provider_id=identity.provider_id,
        email=identity.profile.email,
        actor=account,
    )


def _link(account: Account, identity: Identity) -> Credential:
    """Links a verified provider e-mail to the account holding it. An unverified account may have been
    registered by someone who does not own the address (pre-registration hijack): the provider's word
    verifies it, and whatever that someone holds ends: the password, every other credential (an identity
    whose provider did not vouch for the address included) and every session."""
    audit.record(
        "account.link",
        resource=("account", account.pk),
        changes={"provider": identity.provider},
        actor=account,
    )
    if not account.verified:
        services.reclaim_account(account, password=None, actor=account)
    return _credential(account, identity)


@transaction.atomic
def sign_in_identity(identity: Identity) -> Account:
    """Finds, links or creates the account of `identity` and answers it, enabled, with its credential's
    `last_used_at` set: the one implementation of every login through a provider."""
    profile, failed = identity.profile, identity.failed
    credential = (
        Credential.objects.select_for_update()
        .select_related("account")
        .filter(kind=identity.kind, provider=identity.provider, provider_id=identity.provider_id)
        .first()
    )
    if credential is not None:
        account = credential.account
        _require_admitted(account, identity)
        if credential.status != Credential.Status.ACTIVE:
            raise OAuthFailure(failed, "credential not active")
    else:
        if profile.email is None:
            raise OAuthFailure(failed, "no usable e-mail")
        if not identity.email_trusted:
            raise OAuthFailure(failed, "the provider may not vouch for this e-mail")
        account = Account.objects.select_for_update().filter(email=profile.email).first()
        if account is not None:
            _require_admitted(account, identity)
            if not profile.email_verified:
                raise OAuthFailure(failed, "unverified provider e-mail matches an account")
            credential = _link(account, identity)
        else:
            account = create_account(
                email=profile.email,
                name=profile.name or profile.email.split("@", 1)[0],
                password=None,
                verified=profile.email_verified,
                avatar_url=profile.picture,
            )
            credential = _credential(account, identity)
    if not account.enabled:  # raised inside the transaction: a link just made is undone
        raise OAuthFailure(failed, "account disabled")
    touch_credential(credential.pk)
    audit.record(
        "account.login",
        resource=("account", account.pk),
        changes={"provider": identity.provider},
        actor=account,
    )
    return account


def sign_in(profile: Profile) -> Account:
    """idp_a's login (docs/api.md#oauth-login)."""
    return sign_in_identity(
        Identity(kind=Credential.Kind.OAUTH, provider=PROVIDER, provider_id=profile.sub, profile=profile)
    )


@dataclass(frozen=True)
class SignedIn:
    """Who a provider login found, and for a workspace's own SSO connection, that workspace: the session
    meets its MFA policy. `provider_mfa_trusted`: the connection trusts its provider's second factor, so
    an account with TOTP is not asked for a code."""

    account: Account
    sso_workspace_id: uuid.UUID | None = None
    provider_mfa_trusted: bool = False

    def second_factor_due(self) -> bool:
        """The provider was the first factor, and the account's own second factor follows, unless the SSO
        connection trusts its provider's (docs/api.md#second-factor-totp)."""
        return mfa.has_second_factor(self.account) and not self.provider_mfa_trusted


def finish(
    params: dict[str, str],
    *,
    provider: str,
    failed: str,
    sign_in_with: Callable[[OAuthState, str, str], SignedIn],
    ip: str,
    user_agent: str,
    configured: Callable[[], bool] = lambda: True,
) -> str:
    """The callback of every login through a provider: consumes the state (single use), reads the code and
    the PKCE verifier, lets `sign_in_with(state, code, verifier)` find the account, and answers the URL
    to redirect the browser to, with the session's access token (or an `mfa_token`) or an `error`. `ip` and
    `user_agent` are the browser's, for the session record."""
    redirect_url = None
    try:
        try:
            state = consume_state(params.get("state"), provider)
        except OAuthFailure as failure:
            if not configured():
                raise OAuthFailure(failed, "provider not configured", failure.redirect_url) from None
            raise
        redirect_url = state.redirect_url
        if not configured():
            raise OAuthFailure(failed, "provider not configured")
        if params.get("error") or not params.get("code"):
            raise OAuthFailure(failed, "provider answered without a code")
        verifier = secret_of(state, "code_verifier", failed)
        try:
            signed_in = sign_in_with(state, params["code"], verifier)
        except IntegrityError as exc:  # a concurrent callback created the same account or credential
            raise OAuthFailure(failed, "concurrent sign-in") from exc
        session = answer(signed_in, ip=ip, user_agent=user_agent)
    except OAuthFailure as failure:
        logger.info("oauth %s callback failed: %s (%s)", provider, failure.reason, failure)
        target = failure.redirect_url or redirect_url or fallback_redirect()
        return with_query(target, {"error": failure.reason})
    return with_query(redirect_url, session)


def answer(signed_in: SignedIn, *, ip: str, user_agent: str) -> dict[str, str]:
    """What the browser takes back to the app after a login through a provider (an SSO connection's
    SAML ACS too): the session's access token, or the `mfa_token` of the second factor still due."""
    account, sso_workspace_id = signed_in.account, signed_in.sso_workspace_id
    with transaction.atomic():
        # docs/api.md#second-factor-totp: the provider was the first factor, and `auth/mfa/verify` takes
        # the second, unless the SSO connection trusts its provider's own second factor.
        if signed_in.second_factor_due():
            return {"mfa_token": mfa.challenge(account, amr=["fed"], sso_workspace_id=sso_workspace_id)}
        tokens = start_session(  # RFC 8176: a federated login
            account, amr=["fed"], ip=ip, user_agent=user_agent, sso_workspace_id=sso_workspace_id
        )
        # Never a refresh token in a URL, where browser history and logs keep it: the app gets one from
        # `auth/refresh` with this access token (docs/api.md#auth).
        return {"access_token": tokens["access_token"]}


def complete(params: dict[str, str], *, ip: str, user_agent: str) -> str:
    """idp_a's callback: answers the URL to redirect the browser to, with the session's access token or
    an `error`."""

    def sign_in_with(state: OAuthState, code: str, verifier: str) -> SignedIn:
        config = provider_config()
        assert config is not None  # `configured` said so
        return SignedIn(sign_in(fetch_profile(config, code=code, code_verifier=verifier)))

    return finish(
        params,
        provider=PROVIDER,
        failed=OAUTH_FAILED,
        sign_in_with=sign_in_with,
        ip=ip,
        user_agent=user_agent,
        configured=lambda: provider_config() is not None,
    )


@dataclass(frozen=True)
class SigninOutcome:
    """How a login that the hosted sign-in page started ends at the callback: the browser `session`
    started, or the `mfa_token` of the second factor still due, or the `error`; `next` is the page's
    path to go on to (empty when the state was unknown)."""

    next: str
    session: Session | None = None
    mfa_token: str | None = None
    error: str | None = None


def finish_for_signin(
    params: dict[str, str],
    *,
    provider: str,
    failed: str,
    sign_in_with: Callable[[OAuthState, str, str], SignedIn],
    ip: str,
    user_agent: str,
) -> SigninOutcome:
    """`finish` for a login the hosted sign-in page started (home-realm discovery): the same state,
    provider and account rules, but the session is the browser's (the page sets its cookie), so no token
    travels in a URL."""
    next_url = ""
    try:
        state = consume_state(params.get("state"), provider)
        next_url = state.signin_next
        if not next_url:
            raise OAuthFailure(INVALID_STATE, "not a login of the sign-in page")
        if params.get("error") or not params.get("code"):
            raise OAuthFailure(failed, "provider answered without a code")
        verifier = secret_of(state, "code_verifier", failed)
        try:
            signed_in = sign_in_with(state, params["code"], verifier)
        except IntegrityError as exc:
            raise OAuthFailure(failed, "concurrent sign-in") from exc
        account, sso_workspace_id = signed_in.account, signed_in.sso_workspace_id
        with transaction.atomic():
            if signed_in.second_factor_due():
                token = mfa.challenge(account, amr=["fed"], sso_workspace_id=sso_workspace_id)
                return SigninOutcome(next_url, mfa_token=token)
            session = open_browser_session(
                account, amr=["fed"], ip=ip, user_agent=user_agent, sso_workspace_id=sso_workspace_id
            )
            return SigninOutcome(next_url, session=session)
    except OAuthFailure as failure:
        logger.info("oauth %s sign-in page callback failed: %s (%s)", provider, failure.reason, failure)
        return SigninOutcome(next_url, error=failure.reason)
