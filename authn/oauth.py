"""OAuth2 login with the external provider `idp_a` (SPEC 4 rules 4-6, CONTRACT 10): the callback, and
the rules that create or link an account. The provider client is `oauth_provider`, the state `oauth_state`."""

import logging

from django.db import IntegrityError, transaction

from accounts.models import Account
from accounts.services import clear_password, create_account, update_account
from iam import audit, crypto

from . import services
from .models import Credential
from .oauth_provider import OAUTH_FAILED, PROVIDER, OAuthFailure, Profile, fetch_profile, provider_config
from .oauth_state import consume_state, fallback_redirect, with_query
from .sessions import start_session

logger = logging.getLogger(__name__)


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
            session = start_session(account)
    except OAuthFailure as failure:
        logger.info("oauth idp_a callback failed: %s (%s)", failure.reason, failure)
        target = failure.redirect_url or redirect_url or fallback_redirect()
        return with_query(target, {"error": failure.reason})
    return with_query(redirect_url, session)
