"""`auth/*`: registering, signing in and out, refreshing, the e-mail links and the OAuth
login with `idp_a`."""

from typing import ClassVar

from django.http import HttpRequest, HttpResponseRedirect
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from rest_framework import exceptions
from rest_framework.request import Request

from accounts.serializers import AccountBriefSerializer
from accounts.services import end_sessions
from iam.http.endpoint import Endpoint
from iam.http.errors import AUTHENTICATION_REQUIRED, BEARER_CHALLENGE, ApiError
from iam.platform.addresses import client_ip, user_agent

from .. import email_links, oauth, oauth_provider, oauth_state, serializers, services, sessions, throttling
from ..authentication import SessionTokenAuthentication
from ..emails import CONFIRM, RESET
from ..tokens import TokenError


def _body_names(request: Request, field: str) -> bool:
    """Whether the body is a JSON object holding `field` (a body that does not parse holds nothing)."""
    try:
        body = request.data
    except (ApiError, exceptions.APIException):  # the parser's 400 or 413: the 401 is answered
        return False
    return isinstance(body, dict) and field in body


# One instance writes every answer's account: its fields are plain columns (`ResourceSerializer`'s plan,
# bound once), so it holds nothing of one answer into the next.
_ACCOUNT_BRIEF = AccountBriefSerializer()
_TOKEN_PAIR = {"access_token", "refresh_token"}


def session_payload(account, session: dict) -> dict:
    """`SessionWithAccount`'s answer. A token pair of strings, the common case (every login), is written
    without building the serializer's fields per answer
    (docs/performance.md#what-keeps-the-hot-paths-fast)."""
    if session.keys() == _TOKEN_PAIR and all(type(session[name]) is str for name in _TOKEN_PAIR):
        return {
            "access_token": session["access_token"],
            "refresh_token": session["refresh_token"],
            "account": _ACCOUNT_BRIEF.to_representation(account),
        }
    return serializers.SessionWithAccount({**session, "account": account}).data


class Register(Endpoint):
    """Creates an account with a password and signs it in: the answer is a session (access and refresh tokens)
    with the account. A confirmation link is e-mailed (valid 24 hours); the password credential stays
    `pending` until `auth/confirm`. The address must have exactly one `@`, no quoted local part and no
    comment (400 `invalid email`). Past 100 requests an hour from one client address
    (`IAM_REGISTRATIONS_PER_IP_PER_HOUR`), 429 with `Retry-After`."""

    summary = "Create an account and sign in"
    example_request = {
        "email": "ada@example.com",
        "password": "correct-horse-battery-staple",
        "name": "Ada Lovelace",
    }

    public = True
    request_serializer = serializers.RegisterRequest
    response_serializer = serializers.SessionWithAccount

    def handle(self, request: Request, data: dict) -> dict:
        account, session = services.register(
            email=data["email"],
            password=data["password"],
            name=data.get("name"),
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
        return session_payload(account, session)


class Login(Endpoint):
    """Signs in with e-mail and password: a session with the account. An unknown address and a wrong password
    get the same 401 `invalid credentials`, in the same time. After 5 failures for one address within 15
    minutes, or 50 from one client address, logins for it answer 429 with `Retry-After` until the window
    passes, without checking the password. A disabled account with the right password gets 403 `account
    disabled`. An account with an authenticator (TOTP) gets `{"mfa_required": true, "mfa_token"}` instead
    of a session: `auth/mfa/verify` completes the login with a code within 5 minutes."""

    summary = "Sign in with e-mail and password"
    example_request = {"email": "ada@example.com", "password": "correct-horse-battery-staple"}

    public = True
    request_serializer = serializers.LoginRequest
    response_serializer = serializers.SessionWithAccount

    def handle(self, request: Request, data: dict) -> dict:
        if not data.get("email") or not data.get("password"):
            raise ApiError(400, "email and password required")
        account, session = services.login(
            email=data["email"],
            password=data["password"],
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
        if session.get("mfa_required"):
            return session  # `{"mfa_required": true, "mfa_token"}`: the second step is `auth/mfa/verify`
        return session_payload(account, session)


REFRESH_TOKEN_IN_BODY = "send the refresh token as Authorization: Bearer <token>"


class Refresh(Endpoint):
    """A new session for the refresh token, sent as `Authorization: Bearer <refresh_token>` (not in the
    body). The token is spent: presenting it again ends every session of the account (reuse detection). An
    access token as Bearer works too; a session ends 30 days after its login whatever refreshes happen."""

    summary = "Refresh a session"
    example_request = {}

    authentication_classes = [SessionTokenAuthentication]
    response_serializer = serializers.SessionSerializer

    def initial(self, request: Request, *args, **kwargs) -> None:
        try:
            super().initial(request, *args, **kwargs)
        except (exceptions.NotAuthenticated, exceptions.AuthenticationFailed):
            # The usual mistake, OAuth's token endpoint style: the 401 says where the token goes.
            if _body_names(request, "refresh_token"):
                raise ApiError(
                    401, AUTHENTICATION_REQUIRED, headers=BEARER_CHALLENGE, hint=REFRESH_TOKEN_IN_BODY
                ) from None
            raise

    def handle(self, request: Request, data: dict) -> dict:
        try:
            return sessions.refresh(request.user, request.auth)
        except TokenError as exc:
            # A reused refresh token ended every session of the account: that must commit (RFC 9700 4.14).
            raise ApiError(401, AUTHENTICATION_REQUIRED, commit=True) from exc


class Revoke(Endpoint):
    """Ends every session of the caller's account: its access and refresh tokens stop working at once, in
    every service that validates them. With `except_current: true`, every session but the one of the
    token presented."""

    summary = "Sign out everywhere: end every session"
    example_request = {"except_current": True}

    authentication_classes = [SessionTokenAuthentication]
    request_serializer = serializers.RevokeRequest
    response_serializer = serializers.Revoked

    def handle(self, request: Request, data: dict) -> dict:
        if data["except_current"]:
            sessions.end_other_sessions(request.user, keep=request.auth.get("sid"), actor=request.user)
        else:
            end_sessions(request.user)
        return {"account_id": str(request.user.pk), "revoked": True}


# E-mail flows (docs/api.md#auth): the two requests answer the same whether the address is known or not.


class EmailLink(Endpoint):
    """Mails the address a link of `kind` (when it should get one) and answers `message` either way."""

    public = True
    request_serializer = serializers.EmailRequest
    response_serializer = serializers.Message
    kind: ClassVar[str]
    message: ClassVar[str]

    def handle(self, request: Request, data: dict) -> dict:
        email_links.request_email(self.kind, email=data["email"], ip=client_ip(request))
        return {"message": self.message}


class ResetPassword(EmailLink):
    """E-mails a password reset link when an account has this address; the answer is the same either way,
    so it tells nobody which addresses exist. An address gets at most 3 e-mails an hour; past 20 requests
    an hour from one client address, 429 with `Retry-After`."""

    summary = "E-mail a password reset link"
    example_request = {"email": "ada@example.com"}

    kind = RESET
    message = "If an account exists for this address, a password reset link has been sent."


class ResendConfirm(EmailLink):
    """E-mails a new confirmation link when an unconfirmed account has this address; the answer is the
    same either way, so it tells nobody which addresses exist. An address gets at most 3 e-mails an hour;
    past 20 requests an hour from one client address, 429 with `Retry-After`."""

    summary = "E-mail a new confirmation link"
    example_request = {"email": "ada@example.com"}

    kind = CONFIRM
    message = "If an unconfirmed account exists for this address, a confirmation link has been sent."


class UpdatePassword(Endpoint):
    """Sets a new password with the token of a reset link, which works once; the account's sessions end.
    The link proves the mailbox, so the password then signs in, also for an account made by a provider,
    SSO or SCIM (it gets its password credential now); an account never verified becomes verified, and
    whatever its earlier holder set up (passwords, other credentials, second factors and recovery codes)
    is removed."""

    summary = "Set a new password with a reset link"
    example_request = {
        "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl",
        "password": "a-new-long-passphrase",
    }

    public = True
    request_serializer = serializers.UpdatePasswordRequest
    response_serializer = serializers.PasswordUpdated

    def handle(self, request: Request, data: dict) -> dict:
        account = email_links.update_password(token=data["token"], password=data["password"])
        return {"account_id": str(account.pk)}


class Confirm(Endpoint):
    """Confirms an account's e-mail address with the token of a confirmation link: the account is
    `verified`."""

    summary = "Confirm an e-mail address"
    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}

    public = True
    request_serializer = serializers.TokenRequest
    response_serializer = serializers.Confirmed

    def handle(self, request: Request, data: dict) -> dict:
        account = email_links.confirm_email(token=data["token"])
        return {"account_id": str(account.pk), "verified": True}


# OAuth login with idp_a (docs/api.md#oauth-login)


class OAuthInitiate(Endpoint):
    """Starts a login with `idp_a`: the URL to send the browser to. `redirect_url` must be on an origin of the
    `IAM_OAUTH_REDIRECT_ALLOWLIST` setting (else 400 `redirect_url not allowed`). After the provider, the
    callback redirects the browser there with an `access_token` query parameter (never a refresh token in a
    URL: `auth/refresh` with the access token as Bearer answers a pair), or with `error=invalid_state` or
    `error=oauth_failed`; the query parameters of `redirect_url` are kept, so an app can carry a nonce of
    its own. For an account with an authenticator (TOTP), the callback carries an `mfa_token` instead:
    `auth/mfa/verify` completes the login with a code. The state lives 10 minutes and works once; one
    client address starts at most `IAM_OAUTH_STARTS_PER_IP_PER_MINUTE` (600) logins a minute (429)."""

    summary = "Start a login with idp_a"
    example_request = {"redirect_url": "http://localhost:3000/after-login?nonce=5f2b9c"}

    public = True
    request_serializer = serializers.OAuthInitiateRequest
    response_serializer = serializers.OAuthInitiated

    def handle(self, request: Request, data: dict) -> dict:
        config = oauth_provider.provider_config()
        if config is None:
            raise ApiError(503, "oauth provider not configured")
        if not oauth_state.redirect_allowed(data["redirect_url"]):
            raise ApiError(400, "redirect_url not allowed", "redirect_url")
        ip = client_ip(request)
        if retry_after := throttling.oauth_starts_by_ip.retry_after(ip):
            raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
        throttling.oauth_starts_by_ip.hit(ip)
        auth_url = oauth_state.initiate(config, redirect_url=data["redirect_url"])
        return self.serialize({"auth_url": auth_url})


@csrf_exempt  # no cookie session to protect: without it, a POST got CSRF's 403 instead of 405
@require_GET
def oauth_callback(request: HttpRequest) -> HttpResponseRedirect:
    """Not JSON: the browser comes back from the provider and goes on to the client app
    (docs/api.md#oauth-login). The access token travels in the query (docs/api.md#oauth-login), so the answer
    is neither cached nor sent as Referer."""
    response = HttpResponseRedirect(
        oauth.complete(request.GET.dict(), ip=client_ip(request), user_agent=user_agent(request))
    )
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
