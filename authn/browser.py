"""The browser session of the hosted pages (docs/pages.md#the-browser-session): one cookie,
`iam_session`, holding a session record of kind `browser` (docs/api.md#sessions: `sid`, `amr`, `auth_time`)
and a secret of which the record keeps only a digest. The OpenID Provider's pages and the sign-in pages read
it here; sign-ins make the record through authn's services (`sessions.open_browser_session`) and hand it to
`start_browser_session`; `end_browser_session` ends it as `sessions/revoke` would."""

import secrets
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from iam.platform import crypto

from . import sessions
from .models import Session

COOKIE = "iam_session"
SIGNED_IN = "/signin/done"  # where a sign-in goes when it was not sent anywhere
NEXT_MAX = 2048
_CACHED = "_iam_browser_session"
_TOUCH_EVERY = timedelta(minutes=1)  # `last_used_at` is written at most this often


def current_session(request: HttpRequest) -> Session | None:
    """The browser session the request's cookie holds, with its account loaded; None when there is no
    cookie, or its session is unknown, revoked, expired, ended by a newer session version (a new
    password, `auth/revoke`), or its account disabled. Read once per request."""
    if hasattr(request, _CACHED):
        return getattr(request, _CACHED)
    session = _read(request.COOKIES.get(COOKIE, ""))
    setattr(request, _CACHED, session)
    return session


def _read(value: str) -> Session | None:
    session_id, _, secret = value.partition(".")
    try:
        session_id = uuid.UUID(session_id)
    except ValueError:
        return None
    session = (
        Session.objects.live()
        .select_related("account")
        .filter(pk=session_id, kind=Session.Kind.BROWSER)
        .first()
    )
    if (
        session is None
        or not secret
        or not session.secret_digest
        or not crypto.digest_matches(secret, session.secret_digest)
        or not session.account.enabled
    ):
        return None
    now = timezone.now()
    if now - session.last_used_at > _TOUCH_EVERY:
        Session.objects.filter(pk=session.pk).update(last_used_at=now)
        session.last_used_at = now
    return session


def start_browser_session(response: HttpResponse, session: Session) -> None:
    """Hands the browser its session: a fresh secret (only its digest is stored, so the database holds no
    usable cookie) in the `iam_session` cookie, `HttpOnly`, `SameSite=Lax`, `Secure` when IAM_PUBLIC_URL
    is https, until the session expires."""
    if session.kind != Session.Kind.BROWSER:
        raise ValueError("only a browser session goes in the iam_session cookie")
    secret = secrets.token_urlsafe(32)
    session.secret_digest = crypto.digest(secret)
    Session.objects.filter(pk=session.pk).update(secret_digest=session.secret_digest)
    response.set_cookie(
        COOKIE,
        f"{session.pk}.{secret}",
        expires=session.expires_at,
        path="/",
        secure=settings.IAM_PUBLIC_URL.startswith("https://"),
        httponly=True,
        samesite="Lax",
    )


def end_browser_session(request: HttpRequest, response: HttpResponse) -> None:
    """Signs the browser out: its session ends as `sessions/revoke` ends one (refused at once everywhere,
    `session.revoked` pushed, and the sessions it started end with it), and the cookie is removed."""
    session = current_session(request)
    if session is not None:
        sessions.end_session(session, actor=session.account)
    setattr(request, _CACHED, None)
    response.delete_cookie(COOKIE, path="/", samesite="Lax")


def signed_in(request: HttpRequest, response: HttpResponse, session: Session) -> HttpResponse:
    """A sign-in finished: `session` becomes the browser's, replacing one it already had (whose
    applications' sessions go on under the new one for the same account, and end for another), and
    `response` carries its cookie."""
    earlier = current_session(request)
    if earlier is not None and earlier.pk != session.pk:
        sessions.replace_browser_session(earlier, session, actor=session.account)
    start_browser_session(response, session)
    setattr(request, _CACHED, session)
    return response


def safe_next(value: str | None) -> str:
    """`next` when it is a path on this host (`/oauth2/authorize?...`), else where a sign-in lands by
    default: never another origin, whatever way it is spelled (`//evil`, `/\\evil`, `https:...`)."""
    if not value or len(value) > NEXT_MAX or not value.startswith("/") or value.startswith(("//", "/\\")):
        return SIGNED_IN
    if any(char <= " " or char in "\\\x7f" for char in value):  # browsers drop or rewrite these
        return SIGNED_IN
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return SIGNED_IN
    return value
