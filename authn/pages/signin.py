"""`/signin` and `/signin/code` (docs/pages.md, docs/pages.md): e-mail first; an address of a domain that an
enabled SSO connection verified goes to that provider (home-realm discovery), any other gets the password
step; then the second factor when the account has one. Every rule is the API's: `services.login` (the
throttles, the dummy hash for unknown addresses, a disabled account), `mfa.verify` (one use per code, the
wait after 5 wrong ones), `sso.login` (the provider login). The pages only speak them in words."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip, user_agent
from sso import login as sso_login
from sso import services as sso_services

from .. import browser, mfa, passkeys, services, throttling
from ..oauth import SigninOutcome
from . import passkey
from .common import (
    brand_of_next,
    clear_pending,
    disabled_page,
    go,
    page_url,
    pending,
    remember_sso_state,
    set_pending,
    take_sso_state,
    wait_page,
)
from .forms import CodeForm, EmailForm, PasswordForm, RecoveryCodeForm


def incorrect() -> str:
    return _("Incorrect email or password.")


@pages.hosted_page
@sensitive_post_parameters("password")
@require_http_methods(["GET", "POST"])
def signin(request: HttpRequest) -> HttpResponse:
    next_url = browser.safe_next(request.GET.get("next"))
    if request.method == "GET":
        hint = request.GET.get("login_hint", "")[:254]
        return _email_step(request, EmailForm(initial={"email": hint}), next_url)
    if request.POST.get("step") == "password":
        return _password_step(request, next_url)
    form = EmailForm(request.POST)
    if not form.is_valid():
        return _email_step(request, form, next_url)
    email = form.cleaned_data["email"]
    connection = sso_services.connection_for_email(email)
    if connection is not None:
        return _to_provider(request, connection, next_url)
    return _password_page(request, PasswordForm(initial={"email": email}), next_url)


def _email_step(
    request: HttpRequest, form: EmailForm, next_url: str, *, alert: str = "", status: int = 200
) -> HttpResponse:
    context = {
        "step": "email",
        "form": form,
        "action": page_url("/signin", next_url),
        "passkey_action": page_url("/signin/passkey", next_url),
        "alert": alert,
    }
    return pages.render(request, "authn/signin.html", _branded(context, next_url), status=status)


@pages.hosted_page
@require_http_methods(["POST"])
def passkey_signin(request: HttpRequest) -> HttpResponse:
    """`Sign in with a passkey` (docs/pages.md#passkeys): the script posts the browser's credential for
    the challenge this browser asked for; a browser session (`amr` `hwk`, `user`, `mfa`), then `next`."""
    next_url = browser.safe_next(request.GET.get("next"))
    remembered = request.session.pop(passkey.CHALLENGE, None)
    try:
        session = passkeys.login(
            passkey.credential_of(request),
            ip=client_ip(request),
            user_agent=user_agent(request),
            browser=True,
            challenge=bytes.fromhex(remembered) if isinstance(remembered, str) else b"",
        )[1]
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 403:
            return disabled_page(request)
        return _email_step(request, EmailForm(), next_url, alert=passkey.not_accepted(), status=400)
    clear_pending(request)
    return browser.signed_in(request, go(next_url), session)


def _password_page(request: HttpRequest, form: PasswordForm, next_url: str) -> HttpResponse:
    action = page_url("/signin", next_url)
    context = {"step": "password", "form": form, "email": form["email"].value(), "action": action}
    context["change_email"] = action
    return pages.render(request, "authn/signin.html", _branded(context, next_url))


def _branded(context: dict, next_url: str) -> dict:
    """docs/pages.md#branding: the sign-in for another workspace's application wears its look."""
    brand = brand_of_next(next_url)
    return context if brand is None else {**context, "brand": brand}


def _password_step(request: HttpRequest, next_url: str) -> HttpResponse:
    form = PasswordForm(request.POST)
    if not form.is_valid():
        if form.has_error("email"):  # the hidden address was tampered with: start again
            return _email_step(request, EmailForm(request.POST), next_url)
        return _password_page(request, form, next_url)
    try:
        outcome = services.login(
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password"],
            ip=client_ip(request),
            user_agent=user_agent(request),
            browser=True,
        )[1]
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 403:
            return disabled_page(request)
        form.add_error("password", incorrect())  # unknown address or wrong password: the same words
        return _password_page(request, form, next_url)
    if isinstance(outcome, dict):  # `{"mfa_required": true, "mfa_token"}`: the second factor is due
        set_pending(request, outcome["mfa_token"])
        return go(page_url("/signin/code", next_url))
    return browser.signed_in(request, go(next_url), outcome)


def _to_provider(request: HttpRequest, connection, next_url: str) -> HttpResponse:
    """Home-realm discovery: the workspace's own provider signs the address in (docs/api.md#sso); its
    callback comes back to `sso_callback` below through the SSO callback."""
    ip = client_ip(request)
    if retry_after := throttling.oauth_starts_by_ip.retry_after(ip):
        return wait_page(request, retry_after)
    throttling.oauth_starts_by_ip.hit(ip)
    try:
        started = sso_login.start(connection, redirect_url="", signin_next=next_url)
    except ApiError:  # its secret is unreadable (IAM_ENCRYPTION_KEY changed)
        context = {
            "heading": _("Single sign-on is unavailable"),
            "message": _("Your organisation's sign-in cannot be reached right now. Try again later."),
        }
        return pages.render(request, "authn/message.html", context, status=503)
    remember_sso_state(request, started.state)
    return HttpResponseRedirect(started.url)


@pages.hosted_page
def sso_callback(request: HttpRequest, complete: Callable[..., SigninOutcome]) -> HttpResponse:
    """The end of an SSO login this page started (the SSO callback hands it over): the browser session,
    or the second factor's page, then `next`. Only the browser that started the login finishes it."""
    state = request.GET.get("state", "")
    if not take_sso_state(request, state):
        return _sso_failed(request, browser.SIGNED_IN)
    outcome = complete(request.GET.dict(), ip=client_ip(request), user_agent=user_agent(request))
    next_url = browser.safe_next(outcome.next)
    if outcome.error is not None:
        return _sso_failed(request, next_url)
    if outcome.mfa_token is not None:
        set_pending(request, outcome.mfa_token)
        return go(page_url("/signin/code", next_url))
    return browser.signed_in(request, go(next_url), outcome.session)


def _sso_failed(request: HttpRequest, next_url: str) -> HttpResponse:
    alert = _("Single sign-on did not complete. Try again, or ask your organisation's administrator.")
    return _email_step(request, EmailForm(), next_url, alert=alert, status=400)


@pages.hosted_page
@sensitive_post_parameters("code", "recovery_code")
@require_http_methods(["GET", "POST"])
def second_factor(request: HttpRequest) -> HttpResponse:
    """The second step of a sign-in: a code of the authenticator app, or (`?with=recovery`) a recovery
    code. Without a sign-in waiting for it: back to `/signin`."""
    next_url = browser.safe_next(request.GET.get("next"))
    token = pending(request)
    if token is None:
        return go(page_url("/signin", next_url))
    form_class = RecoveryCodeForm if request.GET.get("with") == "recovery" else CodeForm
    factors = passkeys.pending_factors(token)
    if request.method == "GET":
        return code_page(request, form_class(), next_url, action="/signin/code", factors=factors)
    if "credential" in request.POST:  # the passkey's form (docs/pages.md#passkeys)
        done = passkey.second_factor(request, token, next_url)
        if done is not None:
            return done
        alert = passkey.not_accepted()
        return code_page(
            request, form_class(), next_url, action="/signin/code", factors=factors, alert=alert, status=400
        )
    form = form_class(request.POST)
    if not form.is_valid():
        return code_page(request, form, next_url, action="/signin/code", factors=factors)
    entry = form.cleaned_data[form_class.field_name]
    try:
        session = mfa.verify(
            token,
            code=entry if form_class is CodeForm else None,
            recovery_code=entry if form_class is RecoveryCodeForm else None,
            ip=client_ip(request),
            user_agent=user_agent(request),
            browser=True,
        )[1]
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 403:
            return disabled_page(request)
        if exc.field == "mfa_token":  # 5 minutes passed, or the account's sessions ended meanwhile
            clear_pending(request)
            alert = _("Your sign-in took too long. Start again.")
            return _email_step(request, EmailForm(), next_url, alert=alert, status=400)
        form.add_error(form_class.field_name, wrong_code(form_class))
        return code_page(request, form, next_url, action="/signin/code", factors=factors)
    clear_pending(request)
    return browser.signed_in(request, go(next_url), session)


def wrong_code(form_class: type) -> str:
    if form_class is RecoveryCodeForm:
        return _("Incorrect or already used recovery code.")
    return _("Incorrect code. Check your authenticator app and try again.")


def code_page(
    request: HttpRequest,
    form,
    next_url: str,
    *,
    action: str,
    heading: str = "",
    lead: str = "",
    factors: tuple[bool, bool] = (True, False),
    passkey_for: str = "mfa",
    alert: str = "",
    status: int = 200,
) -> HttpResponse:
    """The second factor's page: a code (or a recovery code) when the account has an authenticator app,
    and `Use a passkey` when it has a passkey (`factors`: the two, docs/pages.md#passkeys)."""
    recovery = isinstance(form, RecoveryCodeForm)
    totp, with_passkey = factors
    context = {
        "totp": totp,
        "passkey": with_passkey,
        "passkey_for": passkey_for,
        "passkey_action": page_url(action, next_url),
        "alert": alert,
        "form": form,
        "field": form[form.field_name],
        "recovery": recovery,
        "action": page_url(action, next_url, **({"with": "recovery"} if recovery else {})),
        "other_method": page_url(action, next_url, **({} if recovery else {"with": "recovery"})),
        "next": next_url,
        "heading": heading,
        "lead": lead,
    }
    return pages.render(request, "authn/code.html", context, status=status)


@pages.hosted_page
@require_http_methods(["GET"])
def signed_in(request: HttpRequest) -> HttpResponse:
    """Where a sign-in lands when nothing sent it anywhere: who is signed in, and a way out."""
    session = browser.current_session(request)
    if session is None:
        return go(page_url("/signin", browser.SIGNED_IN))
    return pages.render(request, "authn/signed_in.html", {"account": session.account})
