"""`/oauth2/authorize` (docs/oidc.md#the-authorization-endpoint): Authlib validates the
request (the application, the exact redirect URI, `response_type`, `scope`, PKCE, `prompt=none` without
a session); then, in this order, the browser's sign-in (`/signin`, again for `prompt=login` or a passed
`max_age`), the workspace (named, the only one, or the chooser), that workspace's second factor
(`/signin/mfa`), another workspace's application's consent, and the code. The chooser and the consent
page post back here, to the same request."""

import time
from urllib.parse import urlencode

from authlib.common.urls import add_params_to_uri
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749.errors import AccessDeniedError, InvalidRequestError
from authlib.oidc.core.errors import ConsentRequiredError, InteractionRequiredError, LoginRequiredError
from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from authn import browser, throttling
from authn.models import Session
from authn.pages.common import workspace_brand
from iam.http import pages
from iam.platform.addresses import client_ip
from rbac.models import Membership
from rbac.policy import SSO_WORKSPACE_CLAIM, grants, mfa_satisfied
from tenancy.models import Workspace
from tenancy.workspace_cache import find_workspace

from .. import services
from ..models import Application
from ..server import server
from ..sessions import SignIn

PROMPTS = frozenset({"none", "login", "consent", "select_account"})
SIGNED_IN_AFTER = "signed_in_after"  # the parameter that says when this request sent the browser to sign in
_signer = signing.Signer(salt="oidc.authorize.signed_in_after")

# The scopes in words, for the consent page.
SCOPE_WORDS = {
    "openid": lambda: _("Know who you are"),
    "profile": lambda: _("See your name and profile picture"),
    "email": lambda: _("See your email address"),
    "offline_access": lambda: _("Stay connected when you are not using it"),
}


@pages.hosted_page
@require_http_methods(["GET", "POST"])
def authorize(request: HttpRequest) -> HttpResponse:
    # a start (docs/security.md#throttling-and-enumeration); the chooser's and consent's answers are not
    if request.method == "GET":
        ip = client_ip(request)
        if retry_after := throttling.oauth_starts_by_ip.retry_after(ip):
            return _error_page(
                request, _("Too many sign-ins from your network. Try again shortly."), 429, retry_after
            )
        throttling.oauth_starts_by_ip.hit(ip)
    session = browser.current_session(request)
    try:
        grant = server.get_consent_grant(request, end_user=session.account if session else None)
    except OAuth2Error as error:
        return _refused(request, error)
    except ValueError:  # characters Authlib cannot quote back in an error (RFC 6749 4.1.2.1): a page
        return _error_page(request, _("This sign-in request is not valid."), 400)
    try:
        return _proceed(request, grant, session)
    except OAuth2Error as error:
        error.redirect_uri, error.state = grant.redirect_uri, grant.request.payload.state
        return _refused(request, error)


def _proceed(request: HttpRequest, grant, session: Session | None) -> HttpResponse:
    payload = grant.request.payload.data
    application: Application = grant.client.application
    prompts = set(payload.get("prompt", "").split())
    if not prompts <= PROMPTS:
        raise InvalidRequestError("prompt may hold none, login, consent and select_account")
    if session is None or _sign_in_again(request, session, prompts, _max_age(payload)):
        if "none" in prompts:
            raise LoginRequiredError()
        return _to_page(request, "/signin", login_hint=payload.get("login_hint", ""), again=True)
    workspace = _workspace(request, application, session, payload, prompts)
    if isinstance(workspace, HttpResponse):
        return workspace
    if workspace is not None and workspace.mfa_required and not _mfa_met(session, workspace):
        if "none" in prompts:
            raise InteractionRequiredError("this workspace requires a second factor")
        return _to_page(request, "/signin/mfa", workspace=workspace)
    if not application.first_party:
        asked = _consent(request, grant, session, prompts)
        if asked is not None:
            return asked
    sign_in = SignIn(browser_session=session, workspace_id=workspace.pk if workspace else None)
    return _with_issuer(server.create_authorization_response(request, grant_user=sign_in, grant=grant))


def _max_age(payload: dict) -> int | None:
    value = payload.get("max_age")
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 12:
        raise InvalidRequestError("max_age must be a whole number of seconds")
    return int(value)


def _sign_in_again(request: HttpRequest, session: Session, prompts: set[str], max_age: int | None) -> bool:
    """`prompt=login`, or a sign-in older than `max_age` (OpenID Connect Core 3.1.2.1), unless the
    browser signed in since this request sent it to (`signed_in_after`, signed by this service)."""
    if "login" not in prompts and (max_age is None or time.time() - session.auth_time <= max_age):
        return False
    try:
        sent_at = int(_signer.unsign(request.GET.get(SIGNED_IN_AFTER, "")))
    except (signing.BadSignature, ValueError):
        return True
    return session.auth_time < sent_at


def _workspace(request: HttpRequest, application: Application, session: Session, payload: dict, prompts):
    """The workspace signed in to: another workspace's application's own (its active members only); for
    a first-party one, the workspace named, the account's only one, or the one chosen on the chooser."""
    account = session.account
    named = payload.get("workspace", "")
    if not application.first_party:
        if named:
            raise InvalidRequestError("workspace is for first-party applications")
        if not grants(account.pk, application.workspace_id).member:
            raise AccessDeniedError("not a member of this application's workspace")
        return application.workspace
    if named:
        workspace = find_workspace(named)
        if workspace is None:
            raise InvalidRequestError("unknown workspace")
        if not account.is_superuser and not grants(account.pk, workspace.pk).member:
            raise AccessDeniedError("not a member of this workspace")
        return workspace
    workspaces = list(
        Workspace.objects.filter(
            pk__in=Membership.objects.filter(account=account, status=Membership.Status.ACTIVE).values(
                "workspace_id"
            )
        ).order_by("name", "id")
    )
    if not workspaces:
        return None
    if len(workspaces) == 1 and "select_account" not in prompts:
        return workspaces[0]
    if "none" in prompts:
        raise InteractionRequiredError("choose a workspace: name it in the workspace parameter")
    context = {"application": application, "workspaces": workspaces, "account": account}
    return pages.render(request, "oidc/choose_workspace.html", context)


def _mfa_met(session: Session, workspace: Workspace) -> bool:
    claims = {"amr": session.amr}
    if session.sso_workspace_id is not None:
        claims[SSO_WORKSPACE_CLAIM] = str(session.sso_workspace_id)
    return mfa_satisfied(claims, workspace.pk)


def _consent(request: HttpRequest, grant, session: Session, prompts: set[str]) -> HttpResponse | None:
    """Another workspace's application asks each account once (`prompt=consent`: again); the answer is the
    consent page's `Allow` or `Deny`, posted back here."""
    application = grant.client.application
    scopes = grant.request.scope.split()
    decision = request.POST.get("consent") if request.method == "POST" else None
    if decision == "deny":
        raise AccessDeniedError("the person declined")
    if decision == "allow":
        services.grant_consent(session.account, application, scopes=scopes)
        return None
    if "consent" not in prompts and services.consent_covers(session.account, application, scopes):
        return None
    if "none" in prompts:
        raise ConsentRequiredError()
    context = {
        "application": application,
        "workspace": application.workspace,
        "account": session.account,
        "scopes": [SCOPE_WORDS[name]() for name in scopes if name in SCOPE_WORDS],
        "brand": workspace_brand(application.workspace),  # docs/pages.md#branding
    }
    return pages.render(request, "oidc/consent.html", context)


def _to_page(
    request: HttpRequest, path: str, *, login_hint: str = "", again: bool = False, workspace=None
) -> HttpResponse:
    """Sends the browser to a sign-in page that comes back to this request as it now stands (the
    workspace chosen; for a sign-in asked anew, the time it was asked, so it is asked once)."""
    params = request.GET.copy()
    if workspace is not None and "workspace" not in params:
        params["workspace"] = str(workspace.pk)
    if again:
        params[SIGNED_IN_AFTER] = _signer.sign(str(int(time.time())))
    back = f"{request.path}?{params.urlencode()}"
    query = {"next": back}
    if login_hint:
        query["login_hint"] = login_hint[:254]
    return HttpResponseRedirect(f"{path}?{urlencode(query)}")


def _with_issuer(response: HttpResponse) -> HttpResponse:
    """RFC 9207: every authorization response names the issuer."""
    if "Location" in response:
        response["Location"] = add_params_to_uri(response["Location"], [("iss", settings.IAM_PUBLIC_URL)])
    return response


def _refused(request: HttpRequest, error: OAuth2Error) -> HttpResponse:
    """An error the application can be told goes back to its redirect URI; an unknown application or an
    unregistered redirect URI is shown on a page and never redirected to (RFC 6749 4.1.2.1)."""
    if error.redirect_uri:
        return _with_issuer(server.handle_error_response(request, error))
    if error.error == "invalid_client":
        message = _("This application is not registered here.")
    elif "redirect" in (error.description or "").lower():
        message = _("The address this sign-in would return to is not registered for the application.")
    else:
        message = _("This sign-in request is not valid.")
    return _error_page(request, message, 400)


def _error_page(
    request: HttpRequest, message: str, status: int, retry_after: int | None = None
) -> HttpResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return pages.render(request, "oidc/error.html", {"message": message}, status=status, headers=headers)
