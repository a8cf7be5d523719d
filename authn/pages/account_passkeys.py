"""The account page's passkeys (docs/pages.md#passkeys): one small POST handler per action of
`templates/account/passkeys.html` (whose context is `account.passkeys_section`), each going back to
`/account` with a notice, as the page's other sections do. Every rule is the API's (`authn.passkeys`):
adding needs a recent sign-in (`auth/passkeys/register/options`) and its challenge is bound to this
browser's session; removing needs one too (`passkeys/delete`); only the account's own passkeys."""

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _

from iam.http.errors import ApiError

from .. import passkeys
from ..models import Session
from .account import CONFIRM, HERE, account_page, account_response, confirm_first, done, not_found, recent
from .common import page_url
from .forms import PasskeyNameForm, RecordForm
from .passkey import credential_of


@account_page(["POST"])
def options(request: HttpRequest, session: Session) -> HttpResponse:
    """The creation options, as JSON, for the script (`auth/passkeys/register/options`), bound to this
    browser's session; an old sign-in gets `{"redirect"}` to the password (or code) prompt."""
    if not recent(session):
        return JsonResponse({"redirect": page_url(CONFIRM, HERE)})
    return JsonResponse(passkeys.registration_options(session.account, session_id=session.pk))


@account_page(["POST"])
def add(request: HttpRequest, session: Session) -> HttpResponse:
    """`Add a passkey`: the name and the browser's credential (`auth/passkeys/register/verify`)."""
    form = PasskeyNameForm(request.POST)
    if not form.is_valid():
        return account_response(request, session, status=400, passkey_form=form)
    try:
        passkeys.register(
            session.account, credential_of(request), name=form.cleaned_data["name"], session_id=session.pk
        )
    except ApiError:
        alert = _("That passkey was not added. Try again.")
        return account_response(request, session, status=400, alert=alert, passkey_form=form)
    return done("passkey-added")


@account_page(["POST"])
def remove(request: HttpRequest, session: Session) -> HttpResponse:
    """`Remove`: one of the account's own passkeys (`passkeys/delete`, which needs a recent sign-in)."""
    form = RecordForm(request.POST)
    if not form.is_valid():
        return not_found(request, session)
    with transaction.atomic():
        try:
            passkey = passkeys.find_passkey(session.account, form.cleaned_data["id"], lock=True)
        except ApiError:
            return not_found(request, session)
        if not recent(session):
            return confirm_first()
        passkeys.delete(passkey, actor=session.account)
    return done("passkey-removed")
