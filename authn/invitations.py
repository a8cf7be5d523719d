"""Accepting and declining an invitation (CONTRACT 15): the invited account's own act, by the link of
the invitation e-mail (`{"token"}`, no Bearer) or signed in (`Bearer` + `{"id"}`). No `X-Workspace`, no
permission: the membership must be the caller's own and still `invited`, else 404."""

from uuid import UUID

from rest_framework import serializers
from rest_framework.request import Request

from iam.api import Endpoint
from iam.errors import AUTHENTICATION_REQUIRED, ApiError
from iam.fields import String, Uuid
from rbac import services as rbac
from rbac.models import Membership
from rbac.serializers import Deleted, MembershipSerializer

from . import tokens
from .authentication import BearerAuthentication
from .tokens import TokenError


class InvitationRequest(serializers.Serializer):
    token = String(required=False, max_length=4096)
    id = Uuid(required=False)


class InvitationEndpoint(Endpoint):
    public = True  # the e-mailed token is the credential; a Bearer token is optional
    request_serializer = InvitationRequest

    def get_authenticators(self):
        return [BearerAuthentication()]

    def invitation(self, request: Request, data: dict) -> Membership:
        invited = Membership.objects.filter(status=Membership.Status.INVITED)
        if "token" in data:
            try:
                claims = tokens.decode(data["token"], types={tokens.MEMBERSHIP_INVITE})
                membership_id = UUID(str(claims.get("mid")))
            except (TokenError, ValueError) as exc:
                raise ApiError(401, AUTHENTICATION_REQUIRED) from exc
            # Single use: a link names one invitation, which it can accept or decline only while it is
            # open and was never accepted.
            found = invited.filter(pk=membership_id, account_id=claims["sub"], accepted_at__isnull=True)
        elif request.user is not None:
            if "id" not in data:
                raise ApiError(400, "id required", "id")
            found = invited.filter(pk=data["id"], account_id=request.user.pk)
        else:
            raise ApiError(400, "token required", "token")
        membership = found.first()
        if membership is None:
            raise ApiError(404, "membership not found")
        return membership


class MembershipAccept(InvitationEndpoint, route="memberships/accept"):
    """Accepts an invitation: with its `token` (no Bearer), or with Bearer and the `id` of the caller's own
    invited membership, which becomes `active`. Anything else (another account's membership, one not
    `invited`, a used token) is 404."""

    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}

    response_serializer = MembershipSerializer

    def handle(self, request: Request, data: dict) -> dict:
        membership = rbac.accept_invitation(self.invitation(request, data))
        return self.serialize(Membership.objects.prefetch_related("roles__permissions").get(pk=membership.pk))


class MembershipDecline(InvitationEndpoint, route="memberships/decline"):
    """Declines an invitation, with the same inputs as `memberships/accept`: the membership is deleted.
    Answers its `id`."""

    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}

    response_serializer = Deleted

    def handle(self, request: Request, data: dict) -> dict:
        return rbac.decline_invitation(self.invitation(request, data))
