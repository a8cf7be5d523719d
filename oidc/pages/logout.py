"""`/oauth2/logout` (OpenID Connect RP-Initiated Logout 1.0, docs/oidc.md#sign-out): with an `id_token_hint`
this service signed, the browser session and every application session it started end at once, then the
browser goes to the application's registered `post_logout_redirect_uri` (with `state`), or sees `You are
signed out`. Without a valid hint the page asks first (a button `Sign out`): anyone could link here."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods

from authn import browser
from iam.http import pages

from ..server import server


@pages.hosted_page
@require_http_methods(["GET", "POST"])
def logout(request: HttpRequest) -> HttpResponse:
    validated = server.validate_endpoint_request("end_session", request)
    if validated.needs_confirmation and request.method == "GET":
        session = browser.current_session(request)
        return pages.render(request, "oidc/sign_out.html", {"account": session.account if session else None})
    response = None
    if not validated.needs_confirmation:
        response = server.create_endpoint_response("end_session", validated)  # the redirect, if any
    if response is None:
        response = pages.render(request, "oidc/signed_out.html")
    browser.end_browser_session(request, response)
    return response
