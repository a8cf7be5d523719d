"""The SSO login: `auth/sso/initiate` and its callback."""

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.http import require_GET
from rest_framework.request import Request

from authn import oauth_state, throttling
from authn.pages import signin as signin_pages
from iam.http.endpoint import Endpoint
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip, user_agent

from .. import login, saml_login, serializers, services
from ..models import SsoConnection


class SsoInitiate(Endpoint):
    """Starts a login through a workspace's own identity provider: by `email` (the enabled connection
    holding that address's verified domain) or by `connection_id`. Answers the URL to send the browser
    to: the provider's authorization URL, or for a SAML connection the IdP's single sign-on URL with an
    AuthnRequest (HTTP-Redirect binding) and the RelayState. The callback (a SAML connection's ACS) goes
    on to `redirect_url` (an allowed client URL) with the session's `access_token` (`auth/refresh` with
    it as Bearer answers a refresh token: none travels in a URL), or with `error=invalid_state` or
    `error=sso_failed` (a SAML login: `error=sso_failed` for every failure). For an account with an
    authenticator (TOTP) it carries an `mfa_token` instead: `auth/mfa/verify` completes the login with a
    code."""

    summary = "Start a login through a workspace's SSO"
    example_request = {"email": "alice@acme.com", "redirect_url": "https://app.example.com/after-login"}

    public = True
    request_serializer = serializers.SsoInitiateRequest
    response_serializer = serializers.SsoInitiated

    def handle(self, request: Request, data: dict) -> dict:
        if not oauth_state.redirect_allowed(data["redirect_url"]):
            raise ApiError(400, "redirect_url not allowed", "redirect_url")
        ip = client_ip(request)
        if retry_after := throttling.oauth_starts_by_ip.retry_after(ip):
            raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
        throttling.oauth_starts_by_ip.hit(ip)
        if "connection_id" in data:
            connection = SsoConnection.objects.filter(pk=data["connection_id"], enabled=True).first()
            if connection is None:
                raise ApiError(404, "sso connection not found", "connection_id")
        else:
            connection = services.connection_for_email(data["email"])
            if connection is None:
                raise ApiError(404, "no sso connection for this domain", "email")
        url = login.initiate(connection, redirect_url=data["redirect_url"])
        return self.serialize({"authorization_url": url})


@require_GET
def sso_callback(request: HttpRequest) -> HttpResponse:
    """Not JSON: the browser comes back from the provider and goes on to the client app. The access token
    travels in the query, so the answer is neither cached nor sent as Referer."""
    # A login the hosted sign-in page started finishes in the browser session (docs/pages.md): no token
    # in any URL.
    if oauth_state.started_from_signin(request.GET.get("state"), login.PROVIDER):
        # A SAML connection's ACS hands its response on to here, where the browser's cookie comes.
        saml = saml_login.handed_over(request.GET.get("code"))
        complete = saml_login.complete_for_signin if saml else login.complete_for_signin
        return signin_pages.sso_callback(request, complete)
    response = HttpResponseRedirect(
        login.complete(request.GET.dict(), ip=client_ip(request), user_agent=user_agent(request))
    )
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
