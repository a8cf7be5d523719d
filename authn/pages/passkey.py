"""Passkeys on the hosted sign-in pages (docs/pages.md#passkeys): `Sign in with a passkey` on `/signin`,
and a passkey as the second factor on `/signin/code`. The one script (`static/pages/passkeys.js`) asks
`/signin/passkey/options` for the options, runs the browser's WebAuthn ceremony, and posts the result
in an ordinary form, so the rules stay the API's (`authn.passkeys`): the challenge, every check, the
throttles, the one refusal. The sign-in's challenge is also remembered in this browser's Django session:
only the browser that asked for it finishes a sign-in with it (no login CSRF)."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip, user_agent

from .. import browser, passkeys
from .common import clear_pending, disabled_page, go, page_url, pending, wait_page

CHALLENGE = "iam_signin_passkey_challenge"  # the sign-in challenge this browser asked for (hex)


def not_accepted() -> str:
    return _("That passkey was not accepted. Try again, or sign in with your email.")


@pages.hosted_page
@require_POST
def options(request: HttpRequest) -> HttpResponse:
    """The WebAuthn request options, as JSON, for the script: the pending second step's (`for=mfa`,
    bound to its `mfa_token`) or a discoverable sign-in's (remembered in this browser's session).
    CSRF-protected like every POST of the pages."""
    try:
        if request.POST.get("for") == "step-up":  # /signin/mfa: this browser's session, bound to it
            session = browser.current_session(request)
            if session is None:
                return JsonResponse({"redirect": page_url("/signin", browser.SIGNED_IN)})
            return JsonResponse(passkeys.step_up_options(session))
        if request.POST.get("for") == "mfa":
            token = pending(request)
            if token is None:
                return JsonResponse({"message": _("Your sign-in took too long. Start again.")}, status=400)
            answer, _challenge = passkeys.authentication_options(ip=client_ip(request), mfa_token=token)
        else:
            answer, challenge = passkeys.authentication_options(ip=client_ip(request))
            request.session[CHALLENGE] = challenge.hex()
    except ApiError as exc:
        response = JsonResponse({"message": exc.message}, status=exc.status)
        for name, value in exc.headers.items():
            response[name] = value
        return response
    return JsonResponse(answer)


def credential_of(request: HttpRequest) -> object:
    """The `credential` field: the JSON the script wrote, or None (what the service then refuses)."""
    return passkeys.credential_from_form(request.POST.get("credential", ""))


def second_factor(request: HttpRequest, token: str, next_url: str) -> HttpResponse | None:
    """`/signin/code` posted with a passkey: the pending sign-in completed, or None after a refusal
    (the code page says so)."""
    try:
        session = passkeys.verify_second_factor(
            token, credential_of(request), ip=client_ip(request), user_agent=user_agent(request), browser=True
        )[1]
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        if exc.status == 403:
            return disabled_page(request)
        if exc.field == "mfa_token":
            clear_pending(request)
            return go(page_url("/signin", next_url))
        return None
    clear_pending(request)
    return browser.signed_in(request, go(next_url), session)
