"""The pages the e-mails' links open (docs/pages.md#self-service-pages): `/confirm-email?token=`, its
`/confirm-email/resend` form, `/forgot-password` and `/reset-password?token=`. Opening a link never acts:
its page shows a button, and only the button's POST calls the API's service (`email_links.confirm_email`,
`email_links.update_password`, `email_links.request_email` with its throttles and its one answer for
every address)."""

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip

from .. import browser, email_links, emails, tokens
from .common import wait_page
from .forms import AddressForm, NewPasswordForm, password_rule_message

TOKEN_MAX = 4096  # far above any token the service mints; a longer one is no link of ours


def link_token(request: HttpRequest) -> str:
    """The link's token: from the form on a POST (the page's hidden field), else from the URL."""
    token = request.POST.get("token") if request.method == "POST" else request.GET.get("token")
    return token if token and len(token) <= TOKEN_MAX else ""


def no_longer_valid(request: HttpRequest, *, new_link: str = "", new_link_words: str = "") -> HttpResponse:
    """A link that cannot act (bad, expired, used, or its account gone): status 400, and where to get a
    new one."""
    context = {"new_link": new_link, "new_link_words": new_link_words}
    return pages.render(request, "authn/link_invalid.html", context, status=400)


def check_email(request: HttpRequest, message: str) -> HttpResponse:
    context = {"heading": _("Check your email"), "message": message}
    return pages.render(request, "authn/check_email.html", context)


def _bad_confirmation(request: HttpRequest) -> HttpResponse:
    return no_longer_valid(request, new_link="/confirm-email/resend", new_link_words=_("Send a new link"))


@pages.hosted_page
@require_http_methods(["GET", "POST"])
def confirm_email(request: HttpRequest) -> HttpResponse:
    token = link_token(request)
    if request.method == "GET":
        if not email_links.link_works(token, tokens.ACCOUNT_CONFIRM):
            return _bad_confirmation(request)
        return pages.render(request, "authn/confirm_email.html", {"token": token})
    try:
        email_links.confirm_email(token=token)
    except ApiError:
        return _bad_confirmation(request)
    context = {"heading": _("Email confirmed"), "message": _("Your email address is confirmed.")}
    return pages.render(request, "authn/done.html", context)


@pages.hosted_page
@require_http_methods(["GET", "POST"])
def resend_confirmation(request: HttpRequest) -> HttpResponse:
    return _email_request(
        request,
        kind=emails.CONFIRM,
        heading=_("Send a new link"),
        lead=_("Enter the email address you signed up with. We'll send a new confirmation link."),
        button=_("Send"),
        action="/confirm-email/resend",
        sent=_("If an unconfirmed account exists for this address, we've sent it a new confirmation link."),
    )


@pages.hosted_page
@require_http_methods(["GET", "POST"])
def forgot_password(request: HttpRequest) -> HttpResponse:
    return _email_request(
        request,
        kind=emails.RESET,
        heading=_("Forgot your password?"),
        lead=_("Enter your email address. We'll send you a link to set a new password."),
        button=_("Send reset link"),
        action="/forgot-password",
        sent=_("If an account exists for this address, we've sent it a link to set a new password."),
    )


def _email_request(
    request: HttpRequest, *, kind: str, heading: str, lead: str, button: str, action: str, sent: str
) -> HttpResponse:
    """One form for both requests: the API's `request_email` decides, and answers every address alike
    (docs/api.md#throttling: 3 e-mails per address per hour, 20 requests per client address)."""
    form = AddressForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            email_links.request_email(kind, email=form.cleaned_data["email"], ip=client_ip(request))
        except ApiError as exc:
            if exc.status == 429:
                return wait_page(request, exc.headers["Retry-After"])
            raise
        return check_email(request, sent)
    context = {"form": form, "heading": heading, "lead": lead, "button": button, "action": action}
    return pages.render(request, "authn/email_request.html", context, status=400 if form.errors else 200)


def _bad_reset(request: HttpRequest) -> HttpResponse:
    return no_longer_valid(request, new_link="/forgot-password", new_link_words=_("Send a new link"))


@pages.hosted_page
@sensitive_post_parameters("password")
@require_http_methods(["GET", "POST"])
def reset_password(request: HttpRequest) -> HttpResponse:
    """A new password from a reset link; `update_password` ends every session of the account (this
    browser's too) and makes the link used."""
    token = link_token(request)
    if request.method == "GET":
        if not email_links.link_works(token, tokens.PASSWORD_RESET):
            return _bad_reset(request)
        return _reset_page(request, NewPasswordForm(), token)
    form = NewPasswordForm(request.POST)
    if not form.is_valid():
        return _reset_page(request, form, token, status=400)
    try:
        email_links.update_password(token=token, password=form.cleaned_data["password"])
    except ApiError as exc:
        if exc.field != "password":
            return _bad_reset(request)
        form.add_error("password", password_rule_message(exc.message))
        return _reset_page(request, form, token, status=400)
    context = {
        "heading": _("Password changed"),
        "message": _("Your new password is set, and you are signed out everywhere. Sign in with it."),
    }
    response = pages.render(request, "authn/done.html", context)
    browser.end_browser_session(request, response)  # already ended with the others: the cookie goes too
    return response


def _reset_page(
    request: HttpRequest, form: NewPasswordForm, token: str, *, status: int = 200
) -> HttpResponse:
    return pages.render(request, "authn/reset_password.html", {"form": form, "token": token}, status=status)
