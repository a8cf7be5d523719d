"""The OpenID Provider's machine endpoints (docs/oidc.md#endpoints), outside the API's envelope in their
standards' own formats: discovery (OpenID Connect Discovery 1.0), the token endpoint (RFC 6749; form-encoded,
`Cache-Control: no-store`), userinfo (OpenID Connect Core 5.3), revocation (RFC 7009) and introspection (RFC
7662). Authlib answers each (oidc/server.py); the application authenticates in the body or with HTTP Basic,
never with a cookie, so none of them takes a CSRF token."""

import base64
import binascii
from collections.abc import Callable

from authlib.integrations.django_oauth2 import ResourceProtector
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749.errors import InvalidClientError, InvalidRequestError
from authlib.oauth2.rfc6750 import BearerTokenValidator, InvalidTokenError
from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from . import claims, sessions
from .server import Token, server

DISCOVERY_MAX_AGE = 3600  # seconds a relying party may cache the discovery document


@require_GET
def discovery(request: HttpRequest) -> JsonResponse:
    issuer = settings.IAM_PUBLIC_URL
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth2/authorize",
        "token_endpoint": f"{issuer}/oauth2/token",
        "userinfo_endpoint": f"{issuer}/oauth2/userinfo",
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
        "revocation_endpoint": f"{issuer}/oauth2/revoke",
        "introspection_endpoint": f"{issuer}/oauth2/introspect",
        "end_session_endpoint": f"{issuer}/oauth2/logout",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": list(claims.SCOPES),
        "claims_supported": list(claims.CLAIMS),
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        "authorization_response_iss_parameter_supported": True,
    }
    response = JsonResponse(document)
    response["Cache-Control"] = f"public, max-age={DISCOVERY_MAX_AGE}"
    return response


def _answered(request: HttpRequest, answer: Callable[[], HttpResponse]) -> HttpResponse:
    """Authlib's answer to a request it can read. An `Authorization: Basic` header that is not base64 of
    UTF-8 is a failed client authentication (401); a value Authlib cannot word in its error (characters
    RFC 6749 5.2 keeps out of `error_description`, lone surrogates) is `invalid_request`: never a 500."""
    if not readable_basic(request.headers.get("Authorization", "")):
        return server.handle_error_response(None, InvalidClientError(status_code=401))
    try:
        return answer()
    except ValueError:  # UnicodeError too; raised before any write, or rolled back with it
        return server.handle_error_response(
            None, InvalidRequestError("the request holds characters it may not")
        )


def readable_basic(header: str) -> bool:
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "basic":
        return True
    try:
        base64.b64decode(credentials.strip(), validate=True).decode()
    except (ValueError, binascii.Error):
        return False
    return True


@csrf_exempt
@require_POST
def token(request: HttpRequest) -> HttpResponse:
    """The code exchange and the refresh. Whatever it answers commits: a replayed code or refresh token
    is refused with `invalid_grant` and the sessions it ends stay ended."""

    def exchange() -> HttpResponse:
        with transaction.atomic():
            return server.create_token_response(request)

    return _answered(request, exchange)


@csrf_exempt
@require_POST
def revoke(request: HttpRequest) -> HttpResponse:
    def revocation() -> HttpResponse:
        with transaction.atomic():
            return server.create_endpoint_response("revocation", request)

    return _answered(request, revocation)


@csrf_exempt
@require_POST
def introspect(request: HttpRequest) -> HttpResponse:
    return _answered(request, lambda: server.create_endpoint_response("introspection", request))


class AccessTokenValidator(BearerTokenValidator):
    """An access token of a current session that an application got with `openid`."""

    def authenticate_token(self, token_string: str) -> Token | None:
        found = sessions.read_access_token(token_string)
        return Token(found[1], found[0]) if found is not None else None

    def validate_token(self, token: Token | None, scopes, request) -> None:
        if token is None or self.scope_insufficient(token.get_scope(), scopes):
            raise InvalidTokenError()


protector = ResourceProtector()
protector.register_token_validator(AccessTokenValidator())


@csrf_exempt
@never_cache
@require_http_methods(["GET", "POST"])
def userinfo(request: HttpRequest) -> JsonResponse:
    try:
        found = protector.acquire_token(request, ["openid"])
    except OAuth2Error:
        error = InvalidTokenError()  # every refusal alike (docs/oidc.md#endpoints)
        response = JsonResponse(dict(error.get_body()), status=error.status_code)
        for name, value in error.get_headers():
            if name != "Content-Type":
                response[name] = value
        return response
    return JsonResponse(claims.standard_claims(found.account, found.scope))
