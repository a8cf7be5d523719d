from rest_framework.request import Request

from accounts.services import end_sessions
from iam.api import Endpoint
from iam.errors import AUTHENTICATION_REQUIRED, ApiError
from tenancy.state import find_workspace, root_workspace

from . import services, sessions, tokens
from .authentication import SessionTokenAuthentication
from .emails import CONFIRM, RESET
from .serializers import (
    Confirmed,
    EmailRequest,
    LoginRequest,
    Message,
    PasswordUpdated,
    RegisterRequest,
    Revoked,
    SessionSerializer,
    SessionWithAccount,
    TokenRequest,
    UpdatePasswordRequest,
)
from .throttling import client_ip
from .tokens import TokenError


def credential_workspace(request: Request):
    """CONTRACT 3: the root workspace, unless the request names one with `X-Workspace`."""
    ref = request.headers.get("X-Workspace", "").strip()
    if not ref:
        return root_workspace()
    workspace = find_workspace(ref)
    if workspace is None:
        raise ApiError(404, "workspace not found", "X-Workspace")
    return workspace


def session_payload(account, session: dict) -> dict:
    return SessionWithAccount({**session, "account": account}).data


class Register(Endpoint):
    public = True
    request_serializer = RegisterRequest
    response_serializer = SessionWithAccount

    def handle(self, request: Request, data: dict) -> dict:
        account, session = services.register(
            email=data["email"],
            password=data["password"],
            name=data.get("name"),
            workspace=credential_workspace(request),
        )
        return session_payload(account, session)


class Login(Endpoint):
    public = True
    request_serializer = LoginRequest
    response_serializer = SessionWithAccount

    def handle(self, request: Request, data: dict) -> dict:
        if not data.get("email") or not data.get("password"):
            raise ApiError(400, "email and password required")
        account, session = services.login(
            email=data["email"], password=data["password"], ip=client_ip(request)
        )
        return session_payload(account, session)


class Refresh(Endpoint):
    authentication_classes = [SessionTokenAuthentication]
    response_serializer = SessionSerializer

    def handle(self, request: Request, data: dict) -> dict:
        account, claims = request.user, request.auth
        if claims["type"] == tokens.ACCESS:
            return sessions.issue_session(account)
        try:
            return sessions.rotate(account, claims)
        except TokenError as exc:
            raise ApiError(401, AUTHENTICATION_REQUIRED) from exc


class Revoke(Endpoint):
    authentication_classes = [SessionTokenAuthentication]
    response_serializer = Revoked

    def handle(self, request: Request, data: dict) -> dict:
        end_sessions(request.user)
        return {"account_id": str(request.user.pk), "revoked": True}


# E-mail flows (SPEC 4 rules 1-2): the two requests answer the same whether the address is known or not.

RESET_MESSAGE = "If an account exists for this address, a password reset link has been sent."
RESEND_MESSAGE = "If an unconfirmed account exists for this address, a confirmation link has been sent."


class ResetPassword(Endpoint):
    public = True
    request_serializer = EmailRequest
    response_serializer = Message

    def handle(self, request: Request, data: dict) -> dict:
        services.request_email(RESET, email=data["email"])
        return {"message": RESET_MESSAGE}


class ResendConfirm(Endpoint):
    public = True
    request_serializer = EmailRequest
    response_serializer = Message

    def handle(self, request: Request, data: dict) -> dict:
        services.request_email(CONFIRM, email=data["email"])
        return {"message": RESEND_MESSAGE}


class UpdatePassword(Endpoint):
    public = True
    request_serializer = UpdatePasswordRequest
    response_serializer = PasswordUpdated

    def handle(self, request: Request, data: dict) -> dict:
        account = services.update_password(token=data["token"], password=data["password"])
        return {"account_id": str(account.pk)}


class Confirm(Endpoint):
    public = True
    request_serializer = TokenRequest
    response_serializer = Confirmed

    def handle(self, request: Request, data: dict) -> dict:
        account = services.confirm_email(token=data["token"])
        return {"account_id": str(account.pk), "verified": True}
