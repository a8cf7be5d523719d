"""The assertion consumer service of a SAML connection (docs/saml.md): the IdP's response to an
AuthnRequest that `auth/sso/initiate` sent (sso/login.py), posted by the browser with the RelayState.
The response is checked (sso/saml.py), its assertion id remembered, and the account signed in by the
steps every SSO login shares (`login.admit`, `authn.oauth.answer`). Any failure ends at
`error=sso_failed`, its reason in the audit entry `sso.login_failed` of the connection's workspace and
never in the browser."""

import hashlib
import logging
import secrets
from urllib.parse import urlencode
from uuid import UUID

from django.core.cache import cache
from django.db import IntegrityError, transaction

from authn.models import OAuthState
from authn.oauth import SignedIn, SigninOutcome, answer, finish_for_signin
from authn.oauth_provider import OAuthFailure, _profile
from authn.oauth_state import consume_state, fallback_redirect, secret_of, started_from_signin, with_query
from iam.platform import audit

from . import login, saml
from .models import SamlAssertion, SsoConnection
from .provider import SSO_FAILED

logger = logging.getLogger(__name__)
REASON_MAX = 500
HANDOVER_SECONDS = 120


def _connection(connection_id: UUID) -> SsoConnection | None:
    return (
        SsoConnection.objects.select_related("workspace")
        .filter(pk=connection_id, protocol=SsoConnection.Protocol.SAML)
        .first()
    )


def _state(relay_state: str | None) -> OAuthState:
    """The login's state, consumed (single use, ten minutes); an unknown, used or expired one fails the
    login like any other refusal."""
    if not relay_state:
        raise OAuthFailure(SSO_FAILED, "no RelayState (an unsolicited response)")
    try:
        return consume_state(relay_state, login.PROVIDER)
    except OAuthFailure as failure:
        raise OAuthFailure(SSO_FAILED, f"RelayState refused: {failure}", failure.redirect_url) from None


def _remember(connection: SsoConnection, asserted: saml.Asserted) -> None:
    """An assertion is accepted once: a second response carrying it (replayed, perhaps under another
    InResponseTo of an unsigned Response) fails, whichever process it reaches."""
    try:
        with transaction.atomic():
            SamlAssertion.objects.create(
                connection=connection,
                assertion_digest=saml.assertion_digest(asserted.assertion_id),
                expires_at=asserted.expires_at,
            )
    except IntegrityError as exc:
        raise OAuthFailure(SSO_FAILED, "assertion already used") from exc


def _sign_in(connection: SsoConnection, state: OAuthState, form: dict[str, str]) -> SignedIn:
    if not connection.enabled:
        raise OAuthFailure(SSO_FAILED, "connection disabled")
    if state.connection_id != connection.pk:
        raise OAuthFailure(SSO_FAILED, "RelayState names a request of another connection")
    authn_request_id = saml.request_id(secret_of(state, "nonce", SSO_FAILED))
    saml_response = form.get("SAMLResponse")
    if not saml_response:
        raise OAuthFailure(SSO_FAILED, "no SAMLResponse")
    try:
        asserted = saml.check_response(connection, saml_response, authn_request_id=authn_request_id)
    except saml.Refused as exc:
        raise OAuthFailure(SSO_FAILED, str(exc)) from exc
    _remember(connection, asserted)
    # The IdP vouches for the address; the verified-domain rule decides what it may find or create.
    claims = {"sub": asserted.name_id, "email": asserted.email, "email_verified": True, "name": asserted.name}
    try:
        profile = _profile(claims)
    except OAuthFailure as failure:
        raise OAuthFailure(SSO_FAILED, str(failure).replace("user-info", "the assertion")) from None
    try:
        return login.admit(connection, profile)
    except IntegrityError as exc:  # a concurrent login created the same account or credential
        raise OAuthFailure(SSO_FAILED, "concurrent sign-in") from exc


def _record_failure(connection: SsoConnection, reason: str) -> None:
    with transaction.atomic():
        audit.record(
            "sso.login_failed",
            resource=("ssoconnection", connection.pk),
            workspace_id=connection.workspace_id,
            changes={"connection_id": str(connection.pk), "reason": reason[:REASON_MAX]},
            actor=None,
        )


def complete(connection_id: UUID, form: dict[str, str], *, ip: str, user_agent: str) -> str:
    """The ACS: the URL to send the browser on to, with the session's access token (or an `mfa_token`),
    or `error=sso_failed`. `form` is the POST's (`SAMLResponse`, `RelayState`); `ip` and `user_agent`
    are the browser's, for the session record."""
    connection = _connection(connection_id)
    redirect_url = None
    try:
        state = _state(form.get("RelayState"))
        redirect_url = state.redirect_url
        if connection is None:
            raise OAuthFailure(SSO_FAILED, "no saml connection at this ACS")
        session = answer(_sign_in(connection, state, form), ip=ip, user_agent=user_agent)
    except OAuthFailure as failure:
        logger.info("saml login failed: %s", failure)
        if connection is not None:
            _record_failure(connection, str(failure))
        target = failure.redirect_url or redirect_url or fallback_redirect()
        return with_query(target, {"error": SSO_FAILED})
    return with_query(redirect_url, session)


# A login the hosted sign-in page started (docs/pages.md) ends in the browser session, bound to the
# browser that started it by its session cookie. The IdP's page posts to the ACS from its own site, and a
# SameSite=Lax cookie does not come with a cross-site POST: the ACS keeps the response two minutes under
# a one-time handle and sends the browser (303, a top-level GET, with its cookies) to the SSO callback,
# where the page's own flow checks the browser and `complete_for_signin` the response.


def _handover_key(handle: str) -> str:
    return "saml-handover:" + hashlib.sha256(handle.encode()).hexdigest()


def hand_over(connection_id: UUID, form: dict[str, str]) -> str | None:
    """The SSO callback's URL with the handle of the posted response, for a login the sign-in page
    started; None for any other (the ACS answers it itself)."""
    relay_state = form.get("RelayState")
    if not started_from_signin(relay_state, login.PROVIDER):
        return None
    handle = secrets.token_urlsafe(32)
    held = {"connection_id": str(connection_id), "saml_response": form.get("SAMLResponse", "")}
    cache.set(_handover_key(handle), held, HANDOVER_SECONDS)
    return f"/auth/sso/callback?{urlencode({'state': relay_state, 'code': handle})}"


def handed_over(code: str | None) -> bool:
    """Whether the callback's `code` is a handle `hand_over` gave."""
    return bool(code) and cache.get(_handover_key(code)) is not None


def _take_handed(state: OAuthState, code: str, verifier: str) -> SignedIn:
    """`finish_for_signin`'s sign-in step: the handed response, taken once, checked at the ACS it was
    posted to, as `complete` checks it."""
    key = _handover_key(code)
    held = cache.get(key)
    cache.delete(key)
    connection = _connection(UUID(held["connection_id"])) if held else None
    if connection is None:
        raise OAuthFailure(SSO_FAILED, "handed response gone or of no saml connection")
    try:
        return _sign_in(connection, state, {"SAMLResponse": held["saml_response"]})
    except OAuthFailure as failure:
        logger.info("saml login failed: %s", failure)
        _record_failure(connection, str(failure))
        raise


def complete_for_signin(params: dict[str, str], *, ip: str, user_agent: str) -> SigninOutcome:
    """The SSO callback of a SAML login the sign-in page started: the browser session, or the second
    factor still due, or the error; the page finishes it (docs/pages.md)."""
    return finish_for_signin(
        params,
        provider=login.PROVIDER,
        failed=SSO_FAILED,
        sign_in_with=_take_handed,
        ip=ip,
        user_agent=user_agent,
    )
