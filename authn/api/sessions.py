"""The caller's sessions (docs/api.md#sessions): listed and ended one by one. No `X-Workspace` and no
permission: an account's sessions are its own; operators reach every account's."""

from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.errors import ApiError
from iam.http.list_endpoint import ListEndpoint
from iam.platform.service_helpers import uuid_or_none

from .. import sessions
from ..models import Session
from ..serializers import SessionRecordSerializer, SessionRevoked, SessionRevokeRequest

OTHER_ACCOUNT = "only an operator may list another account's sessions"


class SessionList(ListEndpoint):
    """The caller's live sessions (not ended, not expired): where and when each began, when it was last
    refreshed, and how the account signed in (`amr`). Filter by `id`, or by `account_id`: another
    account's sessions are for operators only. No permission needed."""

    summary = "List the caller's live sessions"
    example_request = {"options": {"limit": 20, "order_bys": ["!last_used_at"]}}

    permission = None  # self-service: an account's own sessions
    list_key = "sessions"
    response_serializer = SessionRecordSerializer
    filter_fields = {"id": "id", "account_id": "account_id"}
    order_fields = ("created_at", "last_used_at", "expires_at")

    def handle(self, request: Request, data: dict) -> dict:
        asked = data.get("filter", {}).get("fields", {}).get("account_id")
        self.other_account = asked is not None and uuid_or_none(asked) not in (None, request.user.pk)
        if self.other_account and not request.user.is_superuser:
            raise ApiError(403, OTHER_ACCOUNT)
        return super().handle(request, data)

    def get_queryset(self, request: Request) -> QuerySet:
        live = Session.objects.live(timezone.now())
        # An operator's `account_id` filter names the account; anyone else sees only their own.
        return live if self.other_account else live.filter(account=request.user)


class SessionRevoke(Endpoint):
    """Ends one session by `id`: its access and refresh tokens stop working at once, everywhere, while
    the account's other sessions live on. An account ends its own sessions, an operator anyone's; another
    account's session is not found. Ending a session other than the caller's current one needs a recent
    sign-in (`IAM_REAUTH_SECONDS`). No permission needed."""

    summary = "End one session"
    example_request = {"id": "0b8f6c2e-3d4a-4f5b-9c6d-7e8f9a0b1c2d"}

    permission = None  # self-service: an account's own sessions
    request_serializer = SessionRevokeRequest
    response_serializer = SessionRevoked

    def handle(self, request: Request, data: dict) -> dict:
        session = sessions.find_session(request.user, data["id"])
        if session is None:
            raise ApiError(404, "session not found")
        if session.pk != request.auth.get("sid"):
            sessions.require_recent_authentication(request.auth)
        sessions.end_session(session, actor=request.user)
        return {"id": str(session.pk), "revoked": True}
