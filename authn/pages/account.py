"""`/account` (docs/pages.md#the-account-page): the signed-in person's own page. One template per section
(`templates/account/<section>.html`, included by `account/account.html`), each given what it shows by one
function of `SECTIONS`; one small POST handler per action, which goes back to `/account` with a notice
(`?done=<key>`, the words chosen here), or shows the page again with its form's error. Every rule is a
service's, the API's own where the API has the act: `services.change_password` (a login's throttles,
the password rules, every session ends), `sessions.end_session` with `require_recent_authentication`
(`sessions/revoke`), `mfa.enroll|confirm_in_browser|disable` (`auth/mfa/totp/*`),
`oidc.services.revoke_consent`. Signed out, every path goes to `/signin` and back here.

A section is added by one `{% include %}` in `account/account.html`, one function in `SECTIONS` and one
route per action in `authn/urls.py`."""

import uuid
from collections.abc import Callable
from functools import wraps

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip, user_agent
from oidc import services as oidc_services
from oidc.models import Application, Consent
from rbac.models import Membership

from .. import browser, mfa, services, sessions
from ..models import Passkey, Session
from .common import forget_sign_in_steps, go, page_url, wait_page
from .forms import (
    ChangePasswordForm,
    CodeForm,
    ConfirmPasswordForm,
    PasskeyNameForm,
    RecordForm,
    TurnOffForm,
)
from .signin import wrong_code
from .step_up import qr_svg

HERE = "/account"
CONFIRM = "/account/confirm"

# What a finished action says on the page it goes back to (`?done=<key>`): never words from the URL.
NOTICES = {
    "password": gettext_lazy("Your password is changed. Every other session is signed out."),
    "session": gettext_lazy("That session is signed out."),
    "totp-off": gettext_lazy("Your authenticator app is turned off. Every other session is signed out."),
    "revoked": gettext_lazy("The application's access is revoked. It asks again at your next sign-in."),
    "passkey-added": gettext_lazy("Your passkey is added. Signing in with your password now asks for it."),
    "passkey-removed": gettext_lazy("That passkey is removed. It no longer signs you in."),
}

AccountView = Callable[[HttpRequest, Session], HttpResponse]


def account_page(methods: list[str]) -> Callable[[AccountView], Callable[[HttpRequest], HttpResponse]]:
    """A page of `/account`: only for a signed-in browser (its session handed to the view); signed out,
    to `/signin` and back to `/account` (never to a POST's path: a GET there would do nothing)."""

    def decorate(view: AccountView) -> Callable[[HttpRequest], HttpResponse]:
        @pages.hosted_page
        @require_http_methods(methods)
        @wraps(view)
        def page(request: HttpRequest) -> HttpResponse:
            session = browser.current_session(request)
            if session is None:
                return go(page_url("/signin", HERE))
            return view(request, session)

        return page

    return decorate


# The page and its sections


def profile_section(request: HttpRequest, session: Session) -> dict:
    return {"account": session.account}


def password_section(request: HttpRequest, session: Session) -> dict:
    return {"has_password": session.account.has_usable_password(), "password_form": ChangePasswordForm()}


def second_factor_section(request: HttpRequest, session: Session) -> dict:
    return {"totp_on": mfa.has_totp(session.account), "turn_off_form": TurnOffForm()}


def passkeys_section(request: HttpRequest, session: Session) -> dict:
    """The account's passkeys, the newest first, and `Passkey name` (docs/pages.md#passkeys)."""
    listed = Passkey.objects.filter(account=session.account).order_by("-created_at", "id")
    return {"passkeys": list(listed), "passkey_form": PasskeyNameForm()}


def sessions_section(request: HttpRequest, session: Session) -> dict:
    """The account's live sessions (what `sessions/list` answers it), the most recently used first."""
    live = list(Session.objects.live().filter(account=session.account).order_by("-last_used_at", "id"))
    started_by = {row.application_id for row in live if row.application_id is not None}
    names = dict(Application.objects.filter(pk__in=started_by).values_list("id", "name"))
    for row in live:  # an application's session says whose it is (its user agent is the app's server)
        row.application_name = names.get(row.application_id, "")
    return {"sessions": live, "current_session_id": session.pk}


def applications_section(request: HttpRequest, session: Session) -> dict:
    return {"consents": oidc_services.consents_of(session.account)}


def workspaces_section(request: HttpRequest, session: Session) -> dict:
    memberships = (
        Membership.objects.filter(account=session.account, status=Membership.Status.ACTIVE)
        .select_related("workspace", "project")
        .prefetch_related("roles")
        .order_by("workspace__name", "workspace_id", "project__name", "id")
    )
    return {"memberships": list(memberships)}


SECTIONS: tuple[Callable[[HttpRequest, Session], dict], ...] = (
    profile_section,
    password_section,
    second_factor_section,
    passkeys_section,
    sessions_section,
    applications_section,
    workspaces_section,
)


@account_page(["GET"])
def account(request: HttpRequest, session: Session) -> HttpResponse:
    return account_response(request, session)


def account_response(
    request: HttpRequest, session: Session, *, status: int = 200, alert: str = "", **forms
) -> HttpResponse:
    """The whole page; `forms`: a section's bound form that failed, shown with its errors."""
    notice = NOTICES.get(request.GET.get("done", "")) if status == 200 else None
    context = {"notice": notice or "", "alert": alert}
    for section in SECTIONS:
        context.update(section(request, session))
    context.update(forms)
    return pages.render(request, "account/account.html", context, status=status)


def not_found(request: HttpRequest, session: Session) -> HttpResponse:
    """A button naming a record that is not the account's (or no longer there): as if it did not exist."""
    return account_response(request, session, status=404, alert=_("That item was not found."))


def done(key: str) -> HttpResponse:
    return go(f"{HERE}?done={key}")


# Recent authentication (docs/pages.md#the-account-page): the acts the API allows only within
# IAM_REAUTH_SECONDS of a sign-in first ask for the password (or, without one, a code) again.


def recent(session: Session) -> bool:
    try:
        sessions.require_recent_authentication({"auth_time": session.auth_time})
    except ApiError:
        return False
    return True


def confirm_first() -> HttpResponse:
    return go(page_url(CONFIRM, HERE))


@account_page(["GET", "POST"])
@sensitive_post_parameters("password", "code")
def confirm(request: HttpRequest, session: Session) -> HttpResponse:
    next_url = browser.safe_next(request.GET.get("next") or HERE)
    account = session.account
    if account.has_usable_password():
        form_class = ConfirmPasswordForm
    elif mfa.has_totp(account):
        form_class = CodeForm
    else:  # signed in through a provider only: that provider proves it again
        return go(page_url("/signin", next_url, login_hint=account.email))
    form = form_class(request.POST if request.method == "POST" else None)
    if not form.is_bound or not form.is_valid():
        return _confirm_page(request, form, next_url)
    entry = form.cleaned_data[form_class.field_name]
    ip, agent = client_ip(request), user_agent(request)
    try:
        if form_class is ConfirmPasswordForm:
            renewed = services.confirm_password(session, entry, ip=ip, user_agent=agent)
        else:
            renewed = mfa.step_up(session, code=entry, recovery_code=None, ip=ip, user_agent=agent)
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        wrong = _("Incorrect password.") if form_class is ConfirmPasswordForm else wrong_code(CodeForm)
        form.add_error(form_class.field_name, wrong)
        return _confirm_page(request, form, next_url, status=400)
    return browser.signed_in(request, go(next_url), renewed)


def _confirm_page(request: HttpRequest, form, next_url: str, *, status: int = 200) -> HttpResponse:
    context = {
        "form": form,
        "field": form[form.field_name],
        "password": isinstance(form, ConfirmPasswordForm),
        "action": page_url(CONFIRM, next_url),
        "next": next_url,
    }
    return pages.render(request, "account/confirm.html", context, status=status)


# Password


PASSWORD_RULES = {
    "password must have at least 8 characters": gettext_lazy("Use at least 8 characters."),
    "password is too common": gettext_lazy("This password is too common. Choose another."),
}


@account_page(["POST"])
@sensitive_post_parameters("current_password", "new_password")
def change_password(request: HttpRequest, session: Session) -> HttpResponse:
    form = ChangePasswordForm(request.POST)
    if not session.account.has_usable_password():
        return go(HERE)
    if not form.is_valid():
        return account_response(request, session, status=400, password_form=form)
    try:
        renewed = services.change_password(
            session,
            current_password=form.cleaned_data["current_password"],
            new_password=form.cleaned_data["new_password"],
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 401:
            form.add_error("current_password", _("Incorrect password."))
        else:  # docs/api.md#validation: the rule the new password breaks
            form.add_error("new_password", PASSWORD_RULES.get(exc.message, exc.message.capitalize() + "."))
        return account_response(request, session, status=400, password_form=form)
    # The browser's own session ended with the others.
    return browser.signed_in(request, done("password"), renewed)


# Sessions


@account_page(["POST"])
def end_session(request: HttpRequest, session: Session) -> HttpResponse:
    """`sessions/revoke` from the page: one of the account's own sessions (an operator's too: the page is
    no operator's tool); another than this browser's needs a recent sign-in. This browser's own is
    signing out."""
    form = RecordForm(request.POST)
    if not form.is_valid():
        return not_found(request, session)
    with transaction.atomic():
        target = sessions.find_session(session.account, form.cleaned_data["id"])
        if target is None or target.account_id != session.account_id:
            return not_found(request, session)
        if target.pk == session.pk:
            response = pages.render(request, "authn/signed_out.html")
            browser.end_browser_session(request, response)
            forget_sign_in_steps(request)
            return response
        if not recent(session):
            return confirm_first()
        sessions.end_session(target, actor=session.account)
    return done("session")


# The second factor


@account_page(["POST"])
def set_up_totp(request: HttpRequest, session: Session) -> HttpResponse:
    """`Set up authenticator app`: a new secret (or the pending one again), as `auth/mfa/totp/enroll`,
    which needs a recent sign-in."""
    if not recent(session):
        return confirm_first()
    try:
        enrollment = mfa.pending_enrollment(session.account) or mfa.enroll(session.account)
    except ApiError:  # already on (another tab)
        return go(HERE)
    return _enrollment_page(request, enrollment, CodeForm())


@account_page(["POST"])
@sensitive_post_parameters("code")
def turn_on_totp(request: HttpRequest, session: Session) -> HttpResponse:
    """`Turn on`: the first code activates the factor (`auth/mfa/totp/confirm`) and proves it, so this
    browser's session steps up with it; the recovery codes are shown this once. Like the set-up, it needs
    a recent sign-in: its page shows the pending secret again, which an old session must not read."""
    if not recent(session):
        return confirm_first()
    enrollment = mfa.pending_enrollment(session.account)
    if enrollment is None:
        return go(HERE)
    form = CodeForm(request.POST)
    if not form.is_valid():
        return _enrollment_page(request, enrollment, form, status=400)
    try:
        confirmed = mfa.confirm_in_browser(
            session, form.cleaned_data["code"], ip=client_ip(request), user_agent=user_agent(request)
        )
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 409:  # turned on meanwhile, or the set-up was replaced
            return go(HERE)
        form.add_error("code", wrong_code(CodeForm))
        return _enrollment_page(request, enrollment, form, status=400)
    context = {"codes": confirmed["recovery_codes"], "next": HERE}
    response = pages.render(request, "authn/recovery_codes.html", context)
    return browser.signed_in(request, response, confirmed["session"])


def _enrollment_page(
    request: HttpRequest, enrollment: dict, form: CodeForm, *, status: int = 200
) -> HttpResponse:
    context = {
        "qr": qr_svg(enrollment["otpauth_uri"]),
        "secret": enrollment["secret"],
        "form": form,
        "field": form["code"],
        "action": "/account/totp/turn-on",
        "back": HERE,
    }
    return pages.render(request, "authn/mfa_enroll.html", context, status=status)


@account_page(["POST"])
@sensitive_post_parameters("code")
def turn_off_totp(request: HttpRequest, session: Session) -> HttpResponse:
    """`Turn off`: a code, or a recovery code, in one field (`auth/mfa/totp/disable`, which needs a recent
    sign-in); every other session ends, this browser's goes on."""
    form = TurnOffForm(request.POST)
    if not form.is_valid():
        return account_response(request, session, status=400, turn_off_form=form)
    if not recent(session):
        return confirm_first()
    entry = form.cleaned_data["code"].strip()
    is_code = len(entry) == 6 and entry.isascii() and entry.isdigit()
    try:
        mfa.disable(
            session.account,
            {"sid": session.pk},
            code=entry if is_code else None,
            recovery_code=None if is_code else entry,
        )
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 409:  # already off
            return go(HERE)
        wrong = _("Incorrect code. Use a code from your authenticator app, or a recovery code.")
        form.add_error("code", wrong)
        return account_response(request, session, status=400, turn_off_form=form)
    return done("totp-off")


# Applications


@account_page(["POST"])
def revoke_application(request: HttpRequest, session: Session) -> HttpResponse:
    """`Revoke access`: the account's consent to an application goes (`oidc.services.revoke_consent`): its
    sessions of the account end and its next sign-in asks again. Only the account's own consents."""
    form = RecordForm(request.POST)
    if not form.is_valid():
        return not_found(request, session)
    consent = _own_consent(session, form.cleaned_data["id"])
    if consent is None:
        return not_found(request, session)
    oidc_services.revoke_consent(consent, actor=session.account)
    return done("revoked")


def _own_consent(session: Session, consent_id: uuid.UUID) -> Consent | None:
    consents = Consent.objects.select_related("application")
    return consents.filter(pk=consent_id, account=session.account).first()
