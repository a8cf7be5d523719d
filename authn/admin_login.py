"""The admin's sign-in in two steps (docs/security.md#second-factors-and-the-workspace-mfa-policy): an
operator who enrolled TOTP or a passkey gives the password, then a code (or a recovery code) or the
passkey on a second page, before the admin signs it in; the admin is no way around the second factor.
The code is checked by the same rules as `auth/mfa/verify` (`mfa.check_code`): wrong codes counted per
account and refused with 429 past the limit, each code once; a passkey by `auth/mfa/verify`'s too.
While the root workspace requires MFA (`rbac.policy.admin_needs_second_factor`) an operator without a
factor sets one up on the second page first (its secret, then a first code; the recovery codes are
shown once), and a browser session signed in without a second factor may not use the admin
(`session_allowed`). Between the steps the browser's session holds only which account passed the
password, until when, and where to go next; it is not signed in."""

import time
import uuid

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login as auth_login
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from accounts.models import Account
from iam.http.errors import ApiError
from rbac import policy

from . import mfa, passkeys

PENDING = "iam_admin_second_step"
# Set in the browser's session when its sign-in took a second factor.
SECOND_FACTOR_USED = "iam_admin_second_factor"


def session_allowed(request: HttpRequest) -> bool:
    """Whether this signed-in browser session may use the admin: while the root workspace requires MFA,
    only one whose sign-in took a second factor."""
    return bool(request.session.get(SECOND_FACTOR_USED)) or not policy.admin_needs_second_factor()


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code",
        max_length=64,
        help_text="The 6-digit code of your authenticator app, or one of your recovery codes.",
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True}),
    )


class OperatorLoginView(LoginView):
    """The password step. An account with a second factor (TOTP, a passkey) is not signed in yet: the
    browser is sent on to the code step; nor one without, while the policy wants a second factor: it is
    sent to set one up. Otherwise the account is signed in as Django does it."""

    def form_valid(self, form) -> HttpResponse:
        account = form.get_user()
        if mfa.has_second_factor(account):
            step = "admin:login_code"
        elif policy.admin_needs_second_factor():
            step = "admin:login_setup"
        else:
            return super().form_valid(form)
        self.request.session.cycle_key()  # no fixation: a new session key from the first step on
        self.request.session[PENDING] = {
            "account_id": str(account.pk),
            "backend": account.backend,
            "session_version": account.session_version,
            "until": time.time() + settings.IAM_MFA_TOKEN_LIFETIME.total_seconds(),
            "next": self.get_redirect_url(),
            "step_id": str(uuid.uuid4()),  # a passkey's challenge is bound to this step
        }
        return HttpResponseRedirect(reverse(step))


def _pending_account(pending: object) -> Account | None:
    """The account that passed the password step, while that step is fresh and nothing ended its
    sessions since (a disable, a new password, a reset of its second factor)."""
    if not isinstance(pending, dict) or pending.get("until", 0) < time.time():
        return None
    account = Account.objects.filter(pk=pending.get("account_id")).first()
    if account is None or not account.enabled or account.session_version != pending.get("session_version"):
        return None
    return account


@sensitive_post_parameters("code")
@csrf_protect
@never_cache
def login_code(request: HttpRequest) -> HttpResponse:
    """The code step. Without a fresh password step: back to the sign-in page."""
    pending = request.session.get(PENDING)
    account = _pending_account(pending)
    if account is None:
        request.session.pop(PENDING, None)
        return HttpResponseRedirect(reverse("admin:login"))
    if request.method == "POST" and "credential" in request.POST:  # the passkey's form
        return _passkey_step(request, account, pending)
    form = CodeForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            mfa.check_code(account, form.cleaned_data["code"])
        except ApiError as exc:
            if exc.status == 429:
                status = 429
                retry = (exc.headers or {}).get("Retry-After", "")
                form.add_error(None, f"Too many wrong codes: try again in {retry} seconds.")
            else:
                form.add_error("code", "Invalid code.")
        else:
            return HttpResponseRedirect(_sign_in(request, account, pending))
    response = _code_page(request, account, form, status=status)
    if status == 429:
        response["Retry-After"] = retry
    return response


def _code_page(request: HttpRequest, account: Account, form: CodeForm, *, status: int = 200, alert: str = ""):
    context = {
        **admin.site.each_context(request),
        "title": "Second factor",
        "subtitle": None,
        "form": form,
        "email": account.email,
        "totp": mfa.has_totp(account),
        "passkey": passkeys.has_passkey(account),
        "passkey_alert": alert,
    }
    request.current_app = admin.site.name
    return TemplateResponse(request, "admin/login_code.html", context, status=status)


def _passkey_step(request: HttpRequest, account: Account, pending: dict) -> HttpResponse:
    """The code step proven by one of the operator's passkeys (docs/security.md#passkeys): over a
    challenge bound to this pending step, counted as a code when refused."""
    credential = passkeys.credential_from_form(request.POST.get("credential", ""))
    try:
        if not pending.get("step_id"):  # a step begun before passkeys: no challenge can be its
            raise passkeys.NotAccepted()
        passkeys.check_second_step(account, credential, step_id=pending["step_id"])
    except ApiError as exc:
        if exc.status == 429:
            alert = (
                f"Too many wrong codes: try again in {(exc.headers or {}).get('Retry-After', '')} seconds."
            )
            response = _code_page(request, account, CodeForm(), status=429, alert=alert)
            response["Retry-After"] = (exc.headers or {}).get("Retry-After", "")
            return response
        return _code_page(request, account, CodeForm(), status=400, alert="That passkey was not accepted.")
    return HttpResponseRedirect(_sign_in(request, account, pending))


@require_POST
@csrf_protect
@never_cache
def login_passkey_options(request: HttpRequest) -> HttpResponse:
    """The request options of the code step's passkey (JSON, for static/pages/passkeys.js)."""
    pending = request.session.get(PENDING)
    account = _pending_account(pending)
    if account is None or not pending.get("step_id"):
        return JsonResponse({"redirect": reverse("admin:login")})
    return JsonResponse(passkeys.second_factor_options(account, step_id=pending["step_id"])[0])


def _sign_in(request: HttpRequest, account: Account, pending: dict) -> str:
    """Signs the account in after its second factor, and answers where to go next."""
    del request.session[PENDING]
    auth_login(request, account, backend=pending["backend"])
    request.session[SECOND_FACTOR_USED] = True
    target = pending.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        target = reverse("admin:index")
    return target


class SetupForm(forms.Form):
    code = forms.CharField(
        label="Code",
        max_length=64,
        help_text="The 6-digit code your authenticator app shows for this account.",
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True}),
    )


@sensitive_post_parameters("code")
@csrf_protect
@never_cache
def login_setup(request: HttpRequest) -> HttpResponse:
    """The second step of an operator without a second factor, while the policy wants one: the pending
    authenticator's secret (kept across reloads until a first code confirms it), then the ten recovery
    codes, shown once, and on into the admin. Without a fresh password step: back to the sign-in page;
    with TOTP active meanwhile: the code step."""
    pending = request.session.get(PENDING)
    account = _pending_account(pending)
    if account is None:
        request.session.pop(PENDING, None)
        return HttpResponseRedirect(reverse("admin:login"))
    if mfa.has_second_factor(account):
        return HttpResponseRedirect(reverse("admin:login_code"))
    form = SetupForm(request.POST if request.method == "POST" else None)
    status, retry = 200, ""
    request.current_app = admin.site.name
    if request.method == "POST" and form.is_valid():
        try:
            codes = mfa.confirm(account, form.cleaned_data["code"])["recovery_codes"]
        except ApiError as exc:
            if exc.status == 429:
                status, retry = 429, (exc.headers or {}).get("Retry-After", "")
                form.add_error(None, f"Too many wrong codes: try again in {retry} seconds.")
            else:
                form.add_error("code", "Invalid code.")
        else:
            target = _sign_in(request, account, pending)
            context = {
                **admin.site.each_context(request),
                "title": "Recovery codes",
                "subtitle": None,
                "codes": codes,
                "next": target,
            }
            return TemplateResponse(request, "admin/login_recovery_codes.html", context)
    enrolment = mfa.pending_enrollment(account) or mfa.enroll(account)
    context = {
        **admin.site.each_context(request),
        "title": "Set up a second factor",
        "subtitle": None,
        "form": form,
        "email": account.email,
        **enrolment,
    }
    response = TemplateResponse(request, "admin/login_setup.html", context, status=status)
    if status == 429:
        response["Retry-After"] = retry
    return response
