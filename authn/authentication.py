from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from . import tokens
from .sessions import authenticate_token
from .tokens import TokenError


class BearerAuthentication(BaseAuthentication):
    """`Authorization: Bearer <access JWT>` (docs/api.md#authentication). No header: anonymous, and the
    permission check answers 401; a header that does not check out: 401 at once."""

    token_types = frozenset({tokens.ACCESS})

    def authenticate(self, request: Request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed()
        try:
            return authenticate_token(token.strip(), types=self.token_types)
        except TokenError as exc:
            raise AuthenticationFailed() from exc

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="iam"'


class SessionTokenAuthentication(BearerAuthentication):
    """For refresh and revoke, which take an access or a refresh token (docs/security.md#tokens)."""

    token_types = frozenset({tokens.ACCESS, tokens.REFRESH})
