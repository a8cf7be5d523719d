"""`/signout` (docs/pages.md): a GET shows the button, only the POST signs out (a link opened by a mail
scanner or another site changes nothing). Signing out ends the browser session as `sessions/revoke`
would, and with it the applications' sessions it started."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods

from iam.http import pages

from .. import browser
from .common import forget_sign_in_steps


@pages.hosted_page
@require_http_methods(["GET", "POST"])
def signout(request: HttpRequest) -> HttpResponse:
    session = browser.current_session(request)
    if request.method == "GET":
        account = session.account if session is not None else None
        return pages.render(request, "authn/signout.html", {"account": account})
    response = pages.render(request, "authn/signed_out.html")
    browser.end_browser_session(request, response)
    forget_sign_in_steps(request)  # a second step or SSO login under way goes too (the admin's sign-in stays)
    return response
