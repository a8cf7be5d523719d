from uuid import UUID

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from iam.platform import context
from rbac import machine_cache
from rbac.machine_cache import SERVICE_ACCOUNT_CLAIM, ServiceAccountCaller

from . import tokens
from .sessions import check_session
from .tokens import TokenError


class BearerAuthentication(BaseAuthentication):
    """`Authorization: Bearer <access JWT>` (docs/api.md#authentication). No header: anonymous, and the
    permission check answers 401; a header that does not check out: 401 at once."""

    token_types = frozenset({tokens.ACCESS})
    accepts_api_keys = True

    def authenticate(self, request: Request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed()
        if machine_cache.looks_like_key(token.strip()):
            if not self.accepts_api_keys:
                raise AuthenticationFailed()
            return authenticate_key(token.strip())
        try:
            claims = tokens.decode(token.strip(), types=self.token_types)
            if SERVICE_ACCOUNT_CLAIM in claims:  # an application's client credentials token
                if not self.accepts_api_keys:
                    raise AuthenticationFailed()
                return authenticate_machine_token(claims)
            account = check_session(claims)
        except TokenError as exc:
            raise AuthenticationFailed() from exc
        if tokens.APP_WORKSPACE_CLAIM in claims:
            # Another workspace's application got this token for a person: it serves that application
            # (userinfo, introspection, its workspace's clients), never this API
            # (docs/security.md#application-tokens).
            raise AuthenticationFailed()
        return account, claims

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="iam"'


class SessionTokenAuthentication(BearerAuthentication):
    """For refresh and revoke, which take an access or a refresh token (docs/security.md#tokens)."""

    token_types = frozenset({tokens.ACCESS, tokens.REFRESH})
    accepts_api_keys = False


def authenticate_key(raw: str) -> tuple[ServiceAccountCaller, dict]:
    """An API key of a service account (docs/api.md#api-keys): its cached state (no query when warm), 401
    for an unknown, revoked or expired key or a disabled service account. From here on the request acts
    as the service account (`iam.platform.context`: its audit entries name it and the key). Which
    endpoints it may call is `rbac.api.access.EndpointPermission`'s decision."""
    state = machine_cache.get_key_state(raw)
    if machine_cache.refusal(state) is not None:
        raise AuthenticationFailed()
    machine_cache.mark_used(state.key_id, state.service_account_id)
    return _acting(state, {"kind": "api_key", "id": state.key_id})


def authenticate_machine_token(claims: dict) -> tuple[ServiceAccountCaller, dict]:
    """An access token an application's client credentials grant issued for its service account
    (docs/oidc.md#client-credentials): used as the service account's API keys are, refused once the
    service account is disabled or gone."""
    state = machine_cache.token_state(claims)
    if machine_cache.refusal(state) is not None:
        raise AuthenticationFailed()
    return _acting(state, {"kind": "application", "id": claims.get("azp", "")}, claims)


def _acting(state: machine_cache.KeyState, via: dict, claims: dict | None = None):
    """From here on the request acts as the service account: its audit entries name it and `via`."""
    context.act_as_service_account(state.service_account_id, via)
    caller = ServiceAccountCaller(
        id=UUID(state.service_account_id), workspace_id=UUID(state.workspace_id), name=state.name, via=via
    )
    if claims is None:
        claims = {SERVICE_ACCOUNT_CLAIM: state.service_account_id, "exp": state.expires_at}
    return caller, claims
