"""`/signin/mfa` (docs/pages.md, docs/pages.md): a browser signed in with one factor, sent here because a
workspace requires a second one, proves its second factor (`mfa.step_up`), or sets one up first when the
account has none (`/account`'s set-up: the QR code, the secret, `Code`, `Turn on`, the recovery codes),
then goes on to `next`. The rules are the API's: the set-up needs a recent sign-in
(`sessions.require_recent_authentication`), a code works once, 5 wrong codes give a wait."""

import segno
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip, user_agent

from .. import browser, mfa, passkeys, sessions
from ..models import Session
from .common import go, page_url, wait_page
from .forms import CodeForm, RecoveryCodeForm
from .passkey import credential_of, not_accepted
from .signin import code_page, wrong_code

HERE = "/signin/mfa"


@pages.hosted_page
@sensitive_post_parameters("code", "recovery_code")
@require_http_methods(["GET", "POST"])
def step_up(request: HttpRequest) -> HttpResponse:
    next_url = browser.safe_next(request.GET.get("next"))
    session = browser.current_session(request)
    if session is None:
        return go(page_url("/signin", page_url(HERE, next_url)))
    if "mfa" in session.amr:
        return go(next_url)
    if mfa.has_second_factor(session.account):
        return _prove(request, session, next_url)
    return _set_up(request, session, next_url)


def _prove(request: HttpRequest, session: Session, next_url: str) -> HttpResponse:
    form_class = RecoveryCodeForm if request.GET.get("with") == "recovery" else CodeForm
    heading = _("Verify it's you")
    lead = _("This workspace asks for a second factor.")
    factors = (mfa.has_totp(session.account), passkeys.has_passkey(session.account))
    page = {"action": HERE, "heading": heading, "lead": lead, "factors": factors, "passkey_for": "step-up"}
    if request.method == "POST" and "credential" in request.POST:  # the passkey's form
        try:
            stepped = passkeys.step_up(
                session, credential_of(request), ip=client_ip(request), user_agent=user_agent(request)
            )
        except ApiError as exc:
            if exc.status == 429:
                return wait_page(request, exc.headers["Retry-After"])
            return code_page(request, form_class(), next_url, alert=not_accepted(), status=400, **page)
        return browser.signed_in(request, go(next_url), stepped)
    form = form_class(request.POST if request.method == "POST" else None)
    if not form.is_bound or not form.is_valid():
        return code_page(request, form, next_url, **page)
    entry = form.cleaned_data[form_class.field_name]
    try:
        stepped = mfa.step_up(
            session,
            code=entry if form_class is CodeForm else None,
            recovery_code=entry if form_class is RecoveryCodeForm else None,
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        form.add_error(form_class.field_name, wrong_code(form_class))
        return code_page(request, form, next_url, **page)
    return browser.signed_in(request, go(next_url), stepped)


def _set_up(request: HttpRequest, session: Session, next_url: str) -> HttpResponse:
    """Three moments: a button `Set up authenticator app` (a GET changes nothing), then the QR code, the
    secret and `Code` with `Turn on`, then the recovery codes, shown this once."""
    account = session.account
    action = request.POST.get("action") if request.method == "POST" else None
    if action is not None:
        try:  # the API's rule for adding a factor: a sign-in of the last IAM_REAUTH_SECONDS
            sessions.require_recent_authentication({"auth_time": session.auth_time})
        except ApiError:
            return go(page_url("/signin", page_url(HERE, next_url), login_hint=account.email))
    if action == "enroll":
        try:
            enrollment = mfa.pending_enrollment(account) or mfa.enroll(account)
        except ApiError:  # turned on meanwhile (another tab): this page now asks for its code
            return go(page_url(HERE, next_url))
        return _enrollment_page(request, enrollment, CodeForm(), next_url)
    enrollment = mfa.pending_enrollment(account)
    if action != "confirm" or enrollment is None:
        if enrollment is not None:  # shown again (a reload): the secret already scanned
            return _enrollment_page(request, enrollment, CodeForm(), next_url)
        context = {"next": next_url, "action": page_url(HERE, next_url)}
        return pages.render(request, "authn/mfa_start.html", context)
    form = CodeForm(request.POST)
    if not form.is_valid():
        return _enrollment_page(request, enrollment, form, next_url)
    try:
        confirmed = mfa.confirm_in_browser(
            session, form.cleaned_data["code"], ip=client_ip(request), user_agent=user_agent(request)
        )
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        form.add_error("code", wrong_code(CodeForm))
        return _enrollment_page(request, enrollment, form, next_url)
    context = {"codes": confirmed["recovery_codes"], "next": next_url}
    response = pages.render(request, "authn/recovery_codes.html", context)
    return browser.signed_in(request, response, confirmed["session"])


def _enrollment_page(request: HttpRequest, enrollment: dict, form: CodeForm, next_url: str) -> HttpResponse:
    context = {
        "qr": qr_svg(enrollment["otpauth_uri"]),
        "secret": enrollment["secret"],
        "form": form,
        "field": form["code"],
        "action": page_url(HERE, next_url),
        "next": next_url,
    }
    return pages.render(request, "authn/mfa_enroll.html", context)


def qr_svg(uri: str) -> str:
    """The `otpauth://` URI as a QR code, an inline SVG drawn on the server (no script, no image request):
    dark modules on white, with its quiet zone. The page names it for assistive technology."""
    svg = segno.make(uri, error="m").svg_inline(
        scale=4, border=4, dark="#000000", light="#ffffff", svgclass="qr-code", lineclass=None
    )
    return mark_safe(svg)  # noqa: S308 - segno's markup, holding no text of ours
