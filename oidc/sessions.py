"""The protocol's writes and reads of sessions (docs/oidc.md): authorization codes, the application
session a code exchange starts, refreshes, revocation and sign-out. The tokens are this service's own
session tokens (authn/sessions.py) with the application claims (`authn.tokens.APPLICATION_CLAIMS`)."""

import hashlib
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from authn import tokens
from authn.models import Session
from authn.sessions import (
    authenticate_token,
    check_session_state,
    end_session,
    issue_application_session,
    rotate,
)
from authn.tokens import TokenError
from iam.platform import audit
from rbac.machine_cache import SERVICE_ACCOUNT_CLAIM, mark_service_account_used, service_account_state

from .models import Application, AuthorizationCode

CODE_LIFETIME = timedelta(seconds=60)  # docs/oidc.md#codes


class CodeRefused(Exception):
    """The code cannot be exchanged (spent, or its sign-in ended): `invalid_grant`."""


@dataclass(frozen=True)
class SignIn:
    """Who signs in at the authorization endpoint: the browser session, and the workspace chosen or
    named (always the application's own for another workspace's application)."""

    browser_session: Session
    workspace_id: UUID | None


@dataclass
class Issued:
    """What a code exchange or a refresh issued, and what the ID token says about it."""

    account: Account
    claims: dict  # the new access token's, as signed (`sid` a string)
    tokens: dict = field(default_factory=dict)


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def new_code() -> str:
    return secrets.token_urlsafe(32)


def save_code(
    code: str,
    *,
    application: Application,
    sign_in: SignIn,
    redirect_uri: str,
    scope: str,
    nonce: str,
    code_challenge: str,
) -> AuthorizationCode:
    now = timezone.now()
    return AuthorizationCode.objects.create(
        code_digest=_digest(code),
        application=application,
        browser_session=sign_in.browser_session,
        workspace_id=sign_in.workspace_id,
        redirect_uri=redirect_uri,
        scope=scope,
        nonce=nonce or "",
        code_challenge=code_challenge,
        created_at=now,
        expires_at=now + CODE_LIFETIME,
    )


# What a code's exchange reads of the code, its browser session and that session's account, in one
# statement: the rest of their rows is never read (docs/performance.md#what-keeps-the-hot-paths-fast).
CODE_READS = (
    "application",
    "redirect_uri",
    "scope",
    "nonce",
    "code_challenge",
    "workspace_id",
    "expires_at",
    "used_at",
    "session",
    "browser_session",
    "browser_session__account",
    "browser_session__created_at",
    "browser_session__expires_at",
    "browser_session__amr",
    "browser_session__sso_workspace_id",
    "browser_session__session_version",
    "browser_session__revoked_at",
    "browser_session__account__email",
    "browser_session__account__name",
    "browser_session__account__avatar_url",
    "browser_session__account__enabled",
    "browser_session__account__verified",
    "browser_session__account__session_version",
)


def find_code(code: str, application: Application) -> AuthorizationCode | None:
    """The code, when it is this application's, unused and unexpired. A code used before is a replay:
    the session its first use started ends (RFC 6749 4.1.2), whoever presents it."""
    if not isinstance(code, str) or not code:
        return None
    try:
        row = (
            AuthorizationCode.objects.select_related("browser_session__account")
            .only(*CODE_READS)
            .get(code_digest=_digest(code))
        )
    except AuthorizationCode.DoesNotExist:
        return None
    # Read by its key alone (the application's condition cost the ORM's compiler more than this check):
    # another application's code is unknown here, spent or not.
    if row.application_id != application.pk:
        return None
    row.application = application
    if row.used_at is not None:
        _replayed(row)
        return None
    return row if row.expires_at > timezone.now() else None


def _replayed(row: AuthorizationCode) -> None:
    """Audited in the application's workspace; committed even though the request is refused (the token
    endpoint commits whatever it answers)."""
    with transaction.atomic():
        audit.record(
            "oauth2.code_reuse",
            resource=("application", row.application_id),
            workspace_id=row.application.workspace_id,
            changes={
                "account_id": str(row.browser_session.account_id),
                "session_id": str(row.session_id) if row.session_id else None,
            },
        )
        if row.session_id is not None:
            session = Session.objects.select_for_update().get(pk=row.session_id)
            end_session(session, actor=None)


def application_claims(application: Application, *, scope: str, workspace_id: UUID | None) -> dict:
    """The claims that make a session token an application's (docs/security.md#application-tokens)."""
    claims = {"aud": application.client_id, "azp": application.client_id, "scope": scope}
    if workspace_id is not None:
        claims["workspace_id"] = str(workspace_id)
    if not application.first_party:
        claims[tokens.APP_WORKSPACE_CLAIM] = str(application.workspace_id)
    return claims


def exchange_code(row: AuthorizationCode, *, ip: str | None, user_agent: str) -> Issued:
    """Spends the code and starts its application session in one transaction: a concurrent second use
    waits for the row, finds it spent, and ends the session this one started. A refresh token comes only
    with `offline_access`. A code whose sign-in ended (signed out or revoked since it was issued, the
    account disabled) is refused and stays unspent."""
    browser = row.browser_session
    account = browser.account
    if not account.enabled or not browser.is_live(account):
        raise CodeRefused("the sign-in has ended")
    # The session's id is the code's before the session is written: the foreign key is checked at the
    # commit (Django's are DEFERRABLE INITIALLY DEFERRED), so spending the code and naming its session is
    # one statement, and the session is written only by the request that spent it.
    session_id = uuid.uuid4()
    with transaction.atomic(savepoint=False):
        spent = AuthorizationCode.objects.filter(pk=row.pk, used_at__isnull=True).update(
            used_at=timezone.now(), session_id=session_id
        )
        if spent:
            claims = application_claims(row.application, scope=row.scope, workspace_id=row.workspace_id)
            try:
                _, pair = issue_application_session(
                    browser,
                    session_id=session_id,
                    application_id=row.application_id,
                    claims=claims,
                    with_refresh="offline_access" in row.scope.split(),
                    ip=ip,
                    user_agent=user_agent,
                )
            except TokenError as exc:  # the request's transaction rolls back: nothing is spent
                raise CodeRefused("the sign-in has ended") from exc
    if not spent:
        row.refresh_from_db(fields=["session"])
        _replayed(row)
        raise CodeRefused("code already used")
    return Issued(account=account, claims=pair.access_claims, tokens=pair.tokens)


def read_access_token(token: str) -> tuple[Account, dict] | None:
    """The account and claims of an access token whose session is current, else None."""
    try:
        return authenticate_token(token)
    except TokenError:
        return None


def read_refresh_token(token: str) -> tuple[Account, dict] | None:
    """The account and claims of an application's refresh token whose session is current, else None."""
    try:
        account, claims = authenticate_token(token, types=frozenset({tokens.REFRESH}))
    except TokenError:
        return None
    return (account, claims) if "azp" in claims and "sid" in claims else None


def refresh(account: Account, claims: dict, *, scope: str) -> Issued:
    """Rotates the refresh token (authn's rotation: a refresh token presented twice ends the account's
    sessions, RFC 9700 4.14), keeping the session's claims; `scope` may narrow what the new tokens carry.
    Raises `TokenError` when refused."""
    pair = rotate(account, {**claims, "scope": scope})
    return Issued(account=account, claims=pair.access_claims, tokens=pair.tokens)


def read_token(token: str) -> dict | None:
    """The claims of any access or refresh token this service signed and that has not expired, revoked
    or not (revocation and introspection decide what that means)."""
    try:
        return tokens.decode(token, types=tokens.SESSION_TYPES)
    except TokenError:
        return None


def is_current(claims: dict) -> bool:
    """Whether the session of the claims still holds (not revoked, the account enabled)."""
    try:
        check_session_state(claims)
    except TokenError:
        return False
    return True


@transaction.atomic
def revoke(claims: dict) -> None:
    """RFC 7009: an access or refresh token ends its session."""
    session = Session.objects.select_for_update().filter(pk=claims.get("sid")).first()
    if session is not None:
        end_session(session, actor=None)


@transaction.atomic
def sign_out(session_id: UUID | str) -> Session | None:
    """RP-Initiated Logout: the application session an ID token names ends, with its browser session and
    every other application session that browser session started."""
    session = Session.objects.select_for_update().filter(pk=session_id).first()
    if session is None:
        return None
    browser = session.browser_session or session
    end_session(browser, actor=None)
    return browser


# Client credentials (docs/oidc.md#client-credentials)


class MachineRefused(Exception):
    """The application's service account cannot act (disabled, or gone): `invalid_grant`."""


def issue_machine_token(application: Application) -> dict:
    """An access token of the service account a `web` application with the `client_credentials` grant
    names: 60 minutes, `sub` the service account, `aud` and `azp` the application's client_id, no refresh
    token and no ID token. It carries no session: it is checked as the service account's keys are
    (`authn.authentication.authenticate_machine_token`), refused once the service account is disabled
    or deleted."""
    service_account_id = str(application.service_account_id)
    state = service_account_state(service_account_id) if application.service_account_id else None
    if state is None or state[0] != str(application.workspace_id) or not state[2]:
        raise MachineRefused("the application's service account is disabled or gone")
    now = timezone.now()
    client_id = application.client_id
    token, expires_at = tokens.issue(
        application.service_account_id,
        type=tokens.ACCESS,
        session_version=0,
        lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME,
        auth_time=int(now.timestamp()),
        extra={
            SERVICE_ACCOUNT_CLAIM: service_account_id,
            "aud": client_id,
            "azp": client_id,
            "workspace_id": str(application.workspace_id),
            "scope": "",
        },
    )
    mark_service_account_used(service_account_id)
    return {
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": int((expires_at - now).total_seconds()),
        "scope": "",
    }
