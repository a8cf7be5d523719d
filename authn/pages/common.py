"""What the hosted sign-in pages share: where a step goes next, the pages that end a step (a wait, a
disabled account), and the sign-in's pending second step, which the browser's Django session holds
between two pages (never a URL)."""

import hashlib
import math
import uuid
from urllib.parse import parse_qs, urlencode, urlsplit

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from iam.http import pages
from oidc.models import Application

PENDING = "iam_signin_pending"  # the `mfa_token` of a sign-in whose second factor is due
SSO_STATES = "iam_signin_sso_states"  # digests of the SSO logins this browser started (login CSRF)
SSO_STATES_KEPT = 5


def page_url(path: str, next_url: str, **params: str) -> str:
    return f"{path}?{urlencode({'next': next_url, **params})}"


def go(url: str) -> HttpResponse:
    return HttpResponseRedirect(url)


def wait_page(request: HttpRequest, retry_after: str | int) -> HttpResponse:
    """The docs/api.md#throttling throttles in page words: 429 with `Retry-After`, the wait in minutes."""
    seconds = max(1, int(retry_after))
    minutes = math.ceil(seconds / 60)
    message = ngettext(
        "Too many attempts. Wait %(minutes)d minute, then try again.",
        "Too many attempts. Wait %(minutes)d minutes, then try again.",
        minutes,
    ) % {"minutes": minutes}
    context = {"heading": _("Too many attempts"), "message": message}
    return pages.render(
        request, "authn/message.html", context, status=429, headers={"Retry-After": str(seconds)}
    )


def disabled_page(request: HttpRequest) -> HttpResponse:
    """An account disabled by its operators: told only once its password (or factor) was right, as the
    API's 403 `account disabled`."""
    context = {
        "heading": _("This account is disabled"),
        "message": _("You cannot sign in with it. Contact the people who run this service."),
    }
    return pages.render(request, "authn/message.html", context, status=403)


def set_pending(request: HttpRequest, mfa_token: str) -> None:
    request.session.cycle_key()  # no fixation: the step's session key is new
    request.session[PENDING] = mfa_token


def pending(request: HttpRequest) -> str | None:
    token = request.session.get(PENDING)
    return token if isinstance(token, str) else None


def clear_pending(request: HttpRequest) -> None:
    request.session.pop(PENDING, None)


def forget_sign_in_steps(request: HttpRequest) -> None:
    request.session.pop(PENDING, None)
    request.session.pop(SSO_STATES, None)


def state_digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def remember_sso_state(request: HttpRequest, state: str) -> None:
    """The SSO login this browser started from the sign-in page: only this browser may finish it, so
    nobody can sign a victim in to the attacker's account with a callback URL (login CSRF)."""
    kept = [digest for digest in request.session.get(SSO_STATES, []) if isinstance(digest, str)]
    request.session[SSO_STATES] = [*kept, state_digest(state)][-SSO_STATES_KEPT:]


def take_sso_state(request: HttpRequest, state: str) -> bool:
    kept = request.session.get(SSO_STATES, [])
    digest = state_digest(state)
    if not isinstance(kept, list) or digest not in kept:
        return False
    request.session[SSO_STATES] = [other for other in kept if other != digest]
    return True


def workspace_brand(workspace) -> dict:
    """The look of a page shown for one workspace (docs/pages.md#branding): its display name (else its
    name) and logo in the header, its colour as the pages' accent."""
    branding = workspace.branding or {}
    return {
        "name": branding.get("display_name") or workspace.name,
        "logo_url": branding.get("logo_url", ""),
        "stylesheet": pages.accent_url(branding.get("primary_color")),
    }


def brand_of_next(next_url: str) -> dict | None:
    """The branding of a sign-in for another workspace's application (`next` is its
    `/oauth2/authorize?client_id=...`): that workspace's look, else None (the service's own). A first-party
    application's sign-in is the service's."""
    parts = urlsplit(next_url)
    if parts.path != "/oauth2/authorize":
        return None
    try:
        client_id = uuid.UUID(parse_qs(parts.query).get("client_id", [""])[0])
    except ValueError:
        return None
    application = Application.objects.select_related("workspace").filter(pk=client_id).first()
    if application is None or application.first_party:
        return None
    return workspace_brand(application.workspace)
