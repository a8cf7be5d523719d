"""The protocol, from Authlib (docs/oidc.md#the-library-authlib): its Django authorization server with the
authorization code grant (with PKCE and OpenID Connect), the refresh token grant, revocation (RFC 7009),
introspection (RFC 7662) and RP-Initiated Logout. Authlib parses requests, authenticates applications,
runs the grants' checks in their order and words every error (RFC 6749 5.2); its hooks below map onto
our records: an `Application` is its client, an `AuthorizationCode` row its code, and the tokens are this
service's session tokens (oidc/sessions.py)."""

from uuid import UUID

from authlib.integrations.django_oauth2 import AuthorizationServer as DjangoAuthorizationServer
from authlib.integrations.django_oauth2.requests import DjangoOAuth2Payload, DjangoOAuth2Request
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request, grants
from authlib.oauth2.rfc6749.errors import (
    InvalidClientError,
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
)
from authlib.oauth2.rfc6749.util import scope_to_list
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oidc.core.grants import OpenIDCode, OpenIDToken
from authlib.oidc.rpinitiated import EndSessionEndpoint
from authlib.oidc.rpinitiated.end_session import EndSessionRequest
from django.conf import settings
from joserfc.jwk import KeySet

from authn.tokens import TokenError
from iam.platform import crypto
from iam.platform.addresses import client_ip, user_agent

from . import claims, redirect_uris, sessions
from .application_cache import find_application
from .models import Application

CONFIDENTIAL_AUTH = ["client_secret_basic", "client_secret_post"]
FALLBACK_DESCRIPTIONS = {
    "unsupported_grant_type": "grant_type must be authorization_code, refresh_token or client_credentials",
    "invalid_grant": "the code or refresh token is invalid, expired, spent or not this application's",
    "invalid_request": "the request is missing or repeats a parameter",
}
TOKEN_AUTH = [*CONFIDENTIAL_AUTH, "none"]


class Client(ClientMixin):
    """Authlib's view of an `Application`."""

    def __init__(self, application: Application):
        self.application = application
        self.client_id = application.client_id
        self.client_metadata = {"post_logout_redirect_uris": application.post_logout_redirect_uris}

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None  # `redirect_uri` is required (docs/oidc.md#the-authorization-endpoint)

    def get_allowed_scope(self, scope: str | None) -> str:
        """The scopes this service knows, in the order asked; others are ignored (OpenID Connect Core
        3.1.2.1). `offline_access` only for an application that may refresh."""
        refresh = "refresh_token" in self.application.grant_types
        allowed = [
            name
            for name in dict.fromkeys(scope_to_list(scope) or [])
            if name in claims.SCOPES and (name != "offline_access" or refresh)
        ]
        return " ".join(allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uris.matches(
            redirect_uri, self.application.redirect_uris, application_type=self.application.type
        )

    def check_client_secret(self, client_secret: str) -> bool:
        return self.application.confidential and crypto.digest_matches(
            client_secret, self.application.secret_digest
        )

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        """A `web` application proves itself with its secret, a public one sends its id alone; only
        confidential applications introspect (docs/oidc.md#endpoints)."""
        if self.application.confidential:
            return method in CONFIDENTIAL_AUTH
        return method == "none" and endpoint != "introspection"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.application.grant_types


class Code:
    """Authlib's view of an `AuthorizationCode` row."""

    def __init__(self, row):
        self.row = row

    def get_redirect_uri(self) -> str:
        return self.row.redirect_uri

    def get_scope(self) -> str:
        return self.row.scope


class Token:
    """Authlib's view of one of our access or refresh tokens, by its claims."""

    def __init__(self, token_claims: dict, account=None):
        self.claims = token_claims
        self.account = account
        self.scope = token_claims.get("scope", "")

    def check_client(self, client: Client) -> bool:
        return self.claims.get("azp") == client.client_id

    def get_scope(self) -> str:
        return self.scope

    def is_expired(self) -> bool:
        return False  # `sessions.read_token` reads only unexpired tokens

    def is_revoked(self) -> bool:
        return not sessions.is_current(self.claims)


class Pkce(CodeChallenge):
    """RFC 7636 with S256, required of every application (RFC 9700 2.1.1): `plain` and a missing
    challenge are refused at the authorization endpoint."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("code_challenge required (PKCE with S256)")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("code_challenge_method must be S256")
        super().validate_code_challenge(grant, redirect_uri)

    def get_authorization_code_challenge(self, authorization_code: Code) -> str:
        return authorization_code.row.code_challenge

    def get_authorization_code_challenge_method(self, authorization_code: Code) -> str:
        return "S256"


class IdToken(OpenIDToken):
    """The ID token of every token answer with `openid` (oidc/claims.py: exactly docs/oidc.md's claims,
    RS256)."""

    def encode_id_token(self, token: dict, request) -> str:
        code = request.authorization_code
        return claims.id_token(
            request.user,
            request.client.application,
            request.issued_claims,
            nonce=code.row.nonce if code is not None else "",
        )


class OpenIdCode(OpenIDCode, IdToken):
    """The authorization request's OpenID checks (`nonce`, `prompt=none` without a session: login_required)
    and the ID token of the exchange."""

    def exists_nonce(self, nonce: str, request) -> bool:
        # A nonce binds the ID token to the relying party's own session, which checks it (OpenID Connect
        # Core 15.5.2); the code itself is single-use, so a replay is caught there.
        return False


def _token_answer(issued: sessions.Issued, request) -> dict:
    request.issued_claims = issued.claims
    answer = {
        "access_token": issued.tokens["access_token"],
        "token_type": "Bearer",
        "expires_in": max(0, issued.claims["exp"] - issued.claims["iat"]),
        "scope": issued.claims.get("scope", ""),
    }
    if "refresh_token" in issued.tokens:
        answer["refresh_token"] = issued.tokens["refresh_token"]
    return answer


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH

    def save_authorization_code(self, code: str, request) -> None:
        sessions.save_code(
            code,
            application=request.client.application,
            sign_in=request.user,
            redirect_uri=request.payload.redirect_uri,
            scope=request.scope,
            nonce=request.payload.data.get("nonce", ""),
            code_challenge=request.payload.data["code_challenge"],
        )

    def generate_authorization_code(self) -> str:
        return sessions.new_code()

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        row = sessions.find_code(code, client.application)
        return Code(row) if row is not None else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        """Spent by `generate_token`, in the transaction that starts its session."""

    def authenticate_user(self, authorization_code: Code):
        return authorization_code.row.browser_session.account

    def generate_token(
        self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=True
    ):
        django_request = self.request._request
        try:
            issued = sessions.exchange_code(
                self.request.authorization_code.row,
                ip=client_ip(django_request),
                user_agent=user_agent(django_request),
            )
        except sessions.CodeRefused as exc:
            raise InvalidGrantError(str(exc)) from exc
        return _token_answer(issued, self.request)


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotated (RFC 9700 4.14)

    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
        found = sessions.read_refresh_token(refresh_token)
        return Token(found[1], found[0]) if found is not None else None

    def authenticate_user(self, refresh_token: Token):
        return refresh_token.account

    def generate_token(
        self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=True
    ):
        token = self.request.refresh_token
        try:
            issued = sessions.refresh(token.account, token.claims, scope=scope or token.scope)
        except TokenError as exc:
            raise InvalidGrantError("refresh token refused") from exc
        return _token_answer(issued, self.request)

    def revoke_old_credential(self, refresh_token: Token) -> None:
        """Spent by the rotation."""


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    """RFC 6749 4.4 for a `web` application that names a service account of its workspace
    (docs/oidc.md#client-credentials): it proves itself with its secret and gets an access token of the
    service account, no refresh token and no ID token."""

    TOKEN_ENDPOINT_AUTH_METHODS = CONFIDENTIAL_AUTH

    def validate_requested_scope(self) -> None:
        """A `scope` asks for nothing: the token carries the service account's roles, as its keys do."""

    def generate_token(
        self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=False
    ):
        try:
            return sessions.issue_machine_token(self.request.client.application)
        except sessions.MachineRefused as exc:
            raise InvalidGrantError(str(exc)) from exc


class Revocation(RevocationEndpoint):
    """RFC 7009: an application's own token ends its session; any other token answers 200 and changes
    nothing (RFC 7009 2.2)."""

    CLIENT_AUTH_METHODS = TOKEN_AUTH

    def authenticate_token(self, request, client: Client) -> Token | None:
        self.check_params(request, client)
        token = self.query_token(request.form["token"], request.form.get("token_type_hint"))
        return token if token is not None and token.check_client(client) else None

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        found = sessions.read_token(token_string)
        return Token(found) if found is not None else None

    def revoke_token(self, token: Token, request) -> None:
        sessions.revoke(token.claims)


class Introspection(IntrospectionEndpoint):
    """RFC 7662, for confidential applications, about their own tokens only."""

    CLIENT_AUTH_METHODS = CONFIDENTIAL_AUTH

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        found = sessions.read_token(token_string)
        return Token(found) if found is not None else None

    def check_permission(self, token: Token, client: Client, request) -> bool:
        return token.check_client(client)

    def introspect_token(self, token: Token) -> dict:
        answer = {
            "active": True,
            "sub": str(token.claims["sub"]),
            "client_id": token.claims["azp"],
            "scope": token.scope,
            "exp": token.claims["exp"],
            "iat": token.claims["iat"],
            "sid": str(token.claims.get("sid", "")),
            "workspace_id": token.claims.get("workspace_id"),
        }
        return answer


class EndSession(EndSessionEndpoint):
    """RP-Initiated Logout 1.0. A request Authlib refuses (an `id_token_hint` that is not ours, a
    `client_id` that is not its audience) is treated as one without a hint: the page asks first and
    never redirects (RP-Initiated Logout 4)."""

    def validate_request(self, request) -> EndSessionRequest:
        try:
            validated = super().validate_request(request)
        except InvalidRequestError:
            return EndSessionRequest(request=request, client=None)
        hint = validated.id_token_claims
        if hint is not None and (hint.get("iss") != settings.IAM_PUBLIC_URL or not hint.get("sid")):
            return EndSessionRequest(request=request, client=None)
        return validated

    def get_server_jwks(self) -> KeySet:
        return KeySet.import_key_set({"keys": claims.published_rs256_keys()})

    def get_algorithms(self) -> list[str]:
        return ["RS256"]

    def end_session(self, end_session_request: EndSessionRequest) -> None:
        sessions.sign_out(end_session_request.id_token_claims["sid"])


class Request(DjangoOAuth2Request):
    """Authlib's Django request, addressed as the service's public URL names it: TLS is the deployment's
    (IAM_PUBLIC_URL is https in production, the proxy ends TLS), and Authlib's transport check reads this
    address, never the scheme a proxied request arrives with."""

    def __init__(self, request):
        OAuth2Request.__init__(
            self, request.method, settings.IAM_PUBLIC_URL + request.get_full_path(), headers=request.headers
        )
        self.payload = DjangoOAuth2Payload(request)
        self._request = request


class AuthorizationServer(DjangoAuthorizationServer):
    def __init__(self):
        super().__init__(client_model=Application, token_model=None)

    def create_oauth2_request(self, request) -> OAuth2Request:
        return request if isinstance(request, OAuth2Request) else Request(request)

    def query_client(self, client_id: str) -> Client | None:
        try:
            pk = UUID(str(client_id))
        except ValueError:
            return None
        application = find_application(pk)
        return Client(application) if application is not None else None

    def save_token(self, token: dict, request) -> None:
        """The session and its refresh token were recorded when the tokens were issued."""

    def validate_requested_scope(self, scope: str | None) -> None:
        if "openid" not in (scope_to_list(scope) or []):
            raise InvalidScopeError("scope must hold openid")

    def handle_error_response(self, request, error: OAuth2Error):
        """Every error says what went wrong in `error_description` (docs/oidc.md#endpoints), also where
        Authlib has no words of its own."""
        if not error.description:
            error.description = FALLBACK_DESCRIPTIONS.get(error.error, error.error.replace("_", " "))
        return super().handle_error_response(request, error)

    def authenticate_client(self, request, methods, endpoint="token"):
        """An application that does not prove itself is answered 401 with `WWW-Authenticate`, whatever
        the method it tried (RFC 6749 5.2)."""
        try:
            return super().authenticate_client(request, methods, endpoint)
        except InvalidClientError as exc:
            exc.status_code = 401
            raise


def build() -> AuthorizationServer:
    server = AuthorizationServer()
    server.register_grant(AuthorizationCodeGrant, [Pkce(required=True), OpenIdCode(require_nonce=False)])
    server.register_grant(RefreshTokenGrant, [IdToken()])
    server.register_grant(ClientCredentialsGrant)
    server.register_endpoint(Revocation)
    server.register_endpoint(Introspection)
    server.register_endpoint(EndSession)
    return server


server = build()
