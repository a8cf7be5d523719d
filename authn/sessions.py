"""Sessions (docs/security.md#tokens, docs/api.md#sessions): each login a record, its JWT pairs naming it
(`sid`), all bound to the account's session version."""

import ipaddress
import time
import uuid
from datetime import UTC, datetime
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.account_cache import AccountState, account_key, as_account, get_account_state
from accounts.models import Account
from accounts.services import end_sessions
from iam.http.errors import ApiError
from iam.platform import audit, cache, events
from rbac.policy import SSO_WORKSPACE_CLAIM

from . import tokens
from .models import USER_AGENT_MAX, RefreshToken, Session
from .session_cache import forget_sessions, get_session_state, session_key
from .tokens import TokenError


def issue_session(
    account: Account,
    *,
    amr: list[str],
    ip: str | None = None,
    user_agent: str = "",
    sso_workspace_id: uuid.UUID | None = None,
) -> dict:
    """A login: a new session record (docs/api.md#sessions) and its first token pair. `amr` says how the
    account proved itself (RFC 8176: `pwd`, `fed`); `ip` is the client's address as
    `iam.platform.addresses.client_ip` reads it, and the user agent is kept truncated. `sso_workspace_id`: the
    workspace whose own SSO connection the login came through, which meets that workspace's MFA policy; its
    tokens say so in a signed claim (`policy.SSO_WORKSPACE_CLAIM`), so no check has to look it up."""
    session = _new_record(
        account,
        kind=Session.Kind.API,
        amr=amr,
        ip=ip,
        user_agent=user_agent,
        sso_workspace_id=sso_workspace_id,
    )
    session_claims = {"sid": str(session.pk), "amr": session.amr}
    if sso_workspace_id is not None:
        session_claims[SSO_WORKSPACE_CLAIM] = str(sso_workspace_id)
    return _token_pair(account, auth_time=session.auth_time, session_claims=session_claims).tokens


def _new_record(
    account: Account,
    *,
    kind: str,
    amr: list[str],
    ip: str | None,
    user_agent: str,
    sso_workspace_id: uuid.UUID | None,
) -> Session:
    now = timezone.now()
    return Session.objects.create(
        kind=kind,
        account=account,
        created_at=now,
        last_used_at=now,
        expires_at=_session_end(int(now.timestamp())),
        ip=_address(ip),
        user_agent=user_agent.replace("\x00", "")[:USER_AGENT_MAX],  # PostgreSQL refuses NUL
        amr=list(amr),
        session_version=account.session_version,
        sso_workspace_id=sso_workspace_id,
    )


def _session_end(auth_time: int) -> datetime:
    return datetime.fromtimestamp(auth_time, tz=UTC) + settings.IAM_REFRESH_TOKEN_LIFETIME


def _address(ip: str | None) -> str | None:
    """An address the database takes, or None: a forwarded entry a client wrote may be anything, and a
    zone index (`fe80::1%eth0`) says nothing about the client."""
    try:
        return ipaddress.ip_address((ip or "").split("%", 1)[0].strip()).compressed
    except ValueError:
        return None


class Pair(NamedTuple):
    """A session's new tokens, as answered (`access_token`, and `refresh_token` unless withheld), and the
    claims its access token carries (`tokens.Signed.claims`), which the OpenID Provider's answer and ID
    token repeat."""

    tokens: dict
    access_claims: dict


def _token_pair(account: Account, *, auth_time: int, session_claims: dict, with_refresh: bool = True) -> Pair:
    """`auth_time` is the login that started the session; no token of the session outlives it by more
    than the refresh lifetime (docs/security.md#tokens), however often it is refreshed. `session_claims`:
    `sid` and `amr` (none for a session begun before sessions were records). `with_refresh` false: the access
    token alone (an application that was not granted `offline_access`)."""
    session_end = _session_end(auth_time)
    if session_end <= timezone.now():
        raise TokenError("token_expired")
    common = {
        "session_version": account.session_version,
        "auth_time": auth_time,
        "not_after": session_end,
        "extra": session_claims,
    }
    access = tokens.sign(
        account.pk, type=tokens.ACCESS, lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME, **common
    )
    if not with_refresh:
        return Pair({"access_token": access.token}, access.claims)
    refresh_token, expires_at = tokens.issue(
        account.pk,
        type=tokens.REFRESH,
        lifetime=settings.IAM_REFRESH_TOKEN_LIFETIME,
        jti=(jti := uuid.uuid4()),
        **common,
    )
    RefreshToken.objects.create(jti=jti, account=account, expires_at=expires_at)
    return Pair({"access_token": access.token, "refresh_token": refresh_token}, access.claims)


# What a refresh keeps of a session's tokens besides `sid`, `amr` and `auth_time`.
CARRIED_CLAIMS = (SSO_WORKSPACE_CLAIM, *tokens.APPLICATION_CLAIMS)


def _continue(account: Account, claims: dict) -> Pair:
    """A new pair of the session `claims` belong to: the same `sid`, `amr`, `auth_time`, SSO workspace
    and application claims; the session records the refresh as its `last_used_at`."""
    if "sid" not in claims:
        return _token_pair(account, auth_time=claims["auth_time"], session_claims={})
    Session.objects.filter(pk=claims["sid"]).update(last_used_at=timezone.now())
    session_claims = {"sid": str(claims["sid"]), "amr": claims.get("amr", [])}
    session_claims.update((name, claims[name]) for name in CARRIED_CLAIMS if name in claims)
    return _token_pair(account, auth_time=claims["auth_time"], session_claims=session_claims)


def issue_application_session(
    browser_session: Session,
    *,
    application_id: uuid.UUID,
    claims: dict,
    with_refresh: bool,
    ip: str | None = None,
    user_agent: str = "",
    session_id: uuid.UUID | None = None,
) -> tuple[Session, Pair]:
    """The session an application's code exchange starts (docs/security.md#application-sessions): a
    record of its own, with the browser session's `auth_time`, `amr` and SSO workspace, linked to it so
    that ending the browser session ends this one (`end_session`). `claims`: the application claims
    (`tokens.APPLICATION_CLAIMS`) its tokens carry; `session_id`: the id the caller chose for it."""
    account = browser_session.account
    auth_time = browser_session.auth_time
    now = timezone.now()
    session = Session.objects.create(
        id=session_id or uuid.uuid4(),
        account=account,
        created_at=now,
        last_used_at=now,
        expires_at=_session_end(auth_time),
        ip=_address(ip),
        user_agent=user_agent.replace("\x00", "")[:USER_AGENT_MAX],
        amr=list(browser_session.amr),
        session_version=account.session_version,
        sso_workspace_id=browser_session.sso_workspace_id,
        application_id=application_id,
        browser_session=browser_session,
    )
    session_claims = {"sid": str(session.pk), "amr": session.amr, **claims}
    if session.sso_workspace_id is not None:
        session_claims[SSO_WORKSPACE_CLAIM] = str(session.sso_workspace_id)
    pair = _token_pair(account, auth_time=auth_time, session_claims=session_claims, with_refresh=with_refresh)
    return session, pair


def start_session(
    account: Account,
    *,
    amr: list[str],
    ip: str | None = None,
    user_agent: str = "",
    sso_workspace_id: uuid.UUID | None = None,
) -> dict:
    """The session a sign-in starts (a password login, a registration, an OAuth callback): its record and
    first token pair (`issue_session`), and the account's `last_login` set as Django's own `login()` sets
    it for the admin (its `user_logged_in` receiver, `update_last_login`, called here without a request).
    A refresh continues a session and leaves `last_login` as it was."""
    session = issue_session(account, amr=amr, ip=ip, user_agent=user_agent, sso_workspace_id=sso_workspace_id)
    _set_last_login(account)
    return session


def _set_last_login(account: Account) -> None:
    """What Django's `update_last_login` writes (`last_login` alone), in one UPDATE without a save."""
    account.last_login = timezone.now()
    Account.objects.filter(pk=account.pk).update(last_login=account.last_login)


def open_browser_session(
    account: Account,
    *,
    amr: list[str],
    ip: str | None = None,
    user_agent: str = "",
    sso_workspace_id: uuid.UUID | None = None,
) -> Session:
    """A sign-in through the hosted pages: a session record of kind `browser` and no token; the
    `iam_session` cookie that holds it is set by `authn.browser.start_browser_session`. As `start_session`,
    it sets the account's `last_login`."""
    session = _new_record(
        account,
        kind=Session.Kind.BROWSER,
        amr=amr,
        ip=ip,
        user_agent=user_agent,
        sso_workspace_id=sso_workspace_id,
    )
    _set_last_login(account)
    return session


def authenticate_token(
    token: str, *, types: frozenset[str] = frozenset({tokens.ACCESS})
) -> tuple[Account, dict]:
    """Decodes and checks a token against the account's current state: the hot path of every
    authenticated request and of `clients/validate`, free of queries while the account is cached."""
    claims = tokens.decode(token, types=types)
    return check_session(claims), claims


def session_keys(claims: dict) -> list[str]:
    """The cache entries `check_session` reads for these claims, for a caller that fetches them with
    others in one round trip."""
    keys = [account_key(claims["sub"])]
    if "sid" in claims:
        keys.append(session_key(claims["sid"]))
    return keys


def check_session(claims: dict, *, found: dict | None = None) -> Account:
    """The account of decoded claims, when the session they carry is still current (`check_session_state`),
    as an `Account` with the cached fields loaded."""
    return as_account(check_session_state(claims, found=found))


def check_session_state(claims: dict, *, found: dict | None = None) -> AccountState:
    """The cached state of the account of decoded claims, when the session they carry is still current:
    its record not revoked and of the account's session version (a token without `sid`, issued before
    sessions were records: its own `sv` against the account's). `found`: the cached entries
    (`session_keys`) a caller already fetched; else they are fetched here, in one round trip."""
    keys = session_keys(claims)
    if found is None:
        found = cache.get_many(keys)
    account = get_account_state(claims["sub"], prefetched=found.get(keys[0], cache.MISSING))
    if account is None:
        raise TokenError("invalid_token")
    # said before the revocation that the disable also made (docs/api.md#authorization)
    if not account.enabled:
        raise TokenError("account_disabled")
    if "sid" not in claims:
        if claims["sv"] != account.session_version:
            raise TokenError("token_revoked")
        return account
    session = get_session_state(claims["sid"], prefetched=found.get(keys[1], cache.MISSING))
    if (
        session is None
        or session.revoked
        or session.account_id != str(account.id)
        or session.session_version != account.session_version
    ):
        raise TokenError("token_revoked")
    return account


def refresh(account: Account, claims: dict) -> dict:
    """`/auth/refresh`: an access token gets a new pair of the same session; a refresh token is rotated."""
    if claims["type"] == tokens.ACCESS:
        return _continue(account, claims).tokens
    return rotate(account, claims).tokens


def rotate(account: Account, claims: dict) -> Pair:
    """Exchanges a refresh token for a new pair. A refresh token presented a second time means it leaked:
    every session of the account ends (RFC 9700 4.14). The reuse is committed even though the request
    answers 401: it runs in a transaction of its own, outside the request's."""
    # One conditional UPDATE spends the token (the row lock makes a concurrent second use find it spent),
    # in place of a locking read and a write: the session's `last_used_at` costs that trip. In the
    # request's transaction, without a savepoint of its own: nothing here is undone alone.
    with transaction.atomic(savepoint=False):
        spent = RefreshToken.objects.filter(jti=claims["jti"], account=account, used_at__isnull=True)
        if spent.update(used_at=timezone.now()):
            return _continue(account, claims)
    if not RefreshToken.objects.filter(jti=claims["jti"], account=account).exists():
        raise TokenError("invalid_token")
    with transaction.atomic():
        audit.record("session.refresh_reuse", resource=("account", account.pk), actor=account)
        end_sessions(account)  # kept: the caller commits before refusing (`ApiError(commit=True)`)
    raise TokenError("token_revoked")


# Ending sessions (docs/api.md#sessions)

RECENT_AUTHENTICATION_REQUIRED = "recent authentication required"


def require_recent_authentication(claims: dict) -> None:
    """Sensitive acts (ending another session) need a login of the last `IAM_REAUTH_SECONDS`: a refresh
    keeps `auth_time`, so a stolen session cannot do them for long."""
    if time.time() - claims["auth_time"] > settings.IAM_REAUTH_SECONDS:
        raise ApiError(403, RECENT_AUTHENTICATION_REQUIRED)


def find_session(caller: Account, session_id: uuid.UUID) -> Session | None:
    """A session the caller may end, locked: its own, or any for an operator. Another account's session
    is None, as one that does not exist."""
    sessions = Session.objects.select_for_update().filter(pk=session_id)
    if not caller.is_superuser:
        sessions = sessions.filter(account=caller)
    return sessions.first()


@transaction.atomic
def end_session(session: Session, *, actor: Account | None) -> Session:
    """Revokes one session: its access and refresh tokens are refused at once, in every process (the
    cached state is purged around the commit), while the account's other sessions live on. Recorded in
    the account's own log (no workspace's) and pushed as `session.revoked` naming the session. Ending a
    session already revoked changes nothing. The application sessions a browser session started end
    with it (docs/security.md#application-sessions)."""
    if session.revoked_at is None:
        session.revoked_at = timezone.now()
        session.save(update_fields=["revoked_at"])
        audit.record(
            "session.revoke",
            resource=("session", session.pk),
            changes={"account_id": session.account_id, "revoked": {"before": False, "after": True}},
            actor=actor,
        )
        events.emit(
            "session.revoked",
            resource=("account", session.account_id),
            account_ids=[session.account_id],
            data={"session_id": str(session.pk)},
        )
        for child in started_from(session):  # docs/pages.md: signing out ends what the sign-in started
            end_session(child, actor=actor)
    forget_sessions([session.pk])
    return session


def started_from(session: Session) -> list[Session]:
    """The live application sessions this browser session started (none for another kind), locked."""
    if session.kind != Session.Kind.BROWSER:
        return []
    return list(session.application_sessions.select_for_update().filter(revoked_at__isnull=True))


@transaction.atomic
def replace_browser_session(old: Session, new: Session, *, actor: Account | None) -> None:
    """A browser that signs in again (a second factor added to its sign-in, another account, a sign-in
    asked anew): its earlier browser session ends. The sessions that one started go on under the new one
    when the same account signed in, and end with the old one otherwise."""
    if old.account_id == new.account_id:
        Session.objects.filter(browser_session=old, revoked_at__isnull=True).update(browser_session=new)
    end_session(old, actor=actor)


@transaction.atomic
def end_other_sessions(account: Account, *, keep: uuid.UUID | None, actor: Account | None) -> None:
    """`auth/revoke` with `except_current`: every session of the account ends but `keep`. The session
    version moves (every older token fails, those issued before sessions were records included) and
    `keep` moves with it. A caller whose token names no session (issued before sessions were records)
    has none to keep: every recorded session is revoked, and the session version stays."""
    if keep is None:
        for session in Session.objects.live().filter(account=account).select_for_update(of=("self",)):
            end_session(session, actor=actor)
        return
    end_sessions(account)
    Session.objects.filter(pk=keep, account=account, revoked_at__isnull=True).update(
        session_version=account.session_version
    )
    forget_sessions([keep])
