"""The account page's passkeys (docs/pages.md#passkeys): the account's passkeys, each with `Remove`, and
`Passkey name` with `Add a passkey`. A section of the account page: `passkeys_section` gives
`templates/account/passkeys.html` its context; one small POST handler per action. Every rule is the
API's (`authn.passkeys`): adding needs a recent sign-in (`auth/passkeys/register/options`), and its
challenge is bound to this browser's session; removing needs one too (`passkeys/delete`); only the
account's own passkeys. `GET /account/passkeys` shows the section on a page of its own."""

from collections.abc import Callable
from functools import wraps

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from iam.http import pages
from iam.http.errors import ApiError

from .. import browser, passkeys, sessions
from ..models import Passkey, Session
from .common import go, page_url
from .forms import PasskeyNameForm, PasskeyRecordForm
from .passkey import credential_of

HERE = "/account/passkeys"

NOTICES = {
    "passkey-added": gettext_lazy("Your passkey is added. Signing in with your password now asks for it."),
    "passkey-removed": gettext_lazy("That passkey is removed. It no longer signs you in."),
}

PasskeyView = Callable[[HttpRequest, Session], HttpResponse]


def signed_in_page(methods: list[str]) -> Callable[[PasskeyView], Callable[[HttpRequest], HttpResponse]]:
    """Only for a signed-in browser (its session handed to the view); signed out, to `/signin` and back
    to the section's page (never to a POST's path)."""

    def decorate(view: PasskeyView) -> Callable[[HttpRequest], HttpResponse]:
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


def passkeys_section(request: HttpRequest, session: Session) -> dict:
    listed = Passkey.objects.filter(account=session.account).order_by("-created_at", "id")
    return {"passkeys": list(listed), "passkey_form": PasskeyNameForm()}


def section_response(
    request: HttpRequest, session: Session, *, status: int = 200, alert: str = "", **forms
) -> HttpResponse:
    notice = NOTICES.get(request.GET.get("done", "")) if status == 200 else None
    context = {"notice": notice or "", "alert": alert, **passkeys_section(request, session), **forms}
    return pages.render(request, "account/passkeys_page.html", context, status=status)


@signed_in_page(["GET"])
def passkeys_page(request: HttpRequest, session: Session) -> HttpResponse:
    return section_response(request, session)


def recent(session: Session) -> bool:
    try:
        sessions.require_recent_authentication({"auth_time": session.auth_time})
    except ApiError:
        return False
    return True


def reauthenticate() -> str:
    """Where an old sign-in proves itself again before adding or removing a passkey: a new sign-in."""
    return page_url("/signin", HERE)


@signed_in_page(["POST"])
def options(request: HttpRequest, session: Session) -> HttpResponse:
    """The creation options, as JSON, for the script (`auth/passkeys/register/options`), bound to this
    browser's session; an old sign-in gets `{"redirect"}`, where it signs in again."""
    if not recent(session):
        return JsonResponse({"redirect": reauthenticate()})
    return JsonResponse(passkeys.registration_options(session.account, session_id=session.pk))


@signed_in_page(["POST"])
def add(request: HttpRequest, session: Session) -> HttpResponse:
    """`Add a passkey`: the name and the browser's credential (`auth/passkeys/register/verify`)."""
    form = PasskeyNameForm(request.POST)
    if not form.is_valid():
        return section_response(request, session, status=400, passkey_form=form)
    try:
        passkeys.register(
            session.account, credential_of(request), name=form.cleaned_data["name"], session_id=session.pk
        )
    except ApiError:
        alert = _("That passkey was not added. Try again.")
        return section_response(request, session, status=400, alert=alert, passkey_form=form)
    return go(f"{HERE}?done=passkey-added")


@signed_in_page(["POST"])
def remove(request: HttpRequest, session: Session) -> HttpResponse:
    """`Remove`: one of the account's own passkeys (`passkeys/delete`, which needs a recent sign-in)."""
    form = PasskeyRecordForm(request.POST)
    if not form.is_valid():
        return section_response(request, session, status=404, alert=_("That item was not found."))
    with transaction.atomic():
        try:
            passkey = passkeys.find_passkey(session.account, form.cleaned_data["id"], lock=True)
        except ApiError:
            return section_response(request, session, status=404, alert=_("That item was not found."))
        if not recent(session):
            return go(reauthenticate())
        passkeys.delete(passkey, actor=session.account)
    return go(f"{HERE}?done=passkey-removed")
