"""`memberships/create|describe|list|update|delete`, and the invitee's
`memberships/accept|decline`."""

from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from rest_framework.request import Request

from accounts.models import Account
from authn import services as authn
from authn import tokens
from authn.authentication import BearerAuthentication
from authn.tokens import TokenError
from iam.http.endpoint import EncodedJson, Endpoint, answer_fresh
from iam.http.errors import AUTHENTICATION_REQUIRED, ApiError
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of
from tenancy.models import Project

from .. import policy, serializers
from ..models import Membership
from ..services.invitations import linked_membership
from ..services.memberships import (
    accept_invitation,
    create_membership,
    decline_invitation,
    delete_membership,
    update_membership,
)
from .access import get_object, in_visible_projects, project_named, roles_named


def membership_place(request: Request, project_id, *, permission: str) -> Project | None:
    """Where a membership is created or moved to, held to `permission` as a membership already there would
    be: a project (400 unless of this workspace), where a project-scope grant of `permission` counts; or,
    for `None`, the workspace itself, which needs `permission` workspace-wide."""
    if project_id is None:
        policy.require(request.user, request.workspace, permission)
        return None
    project = project_named(request, project_id)
    policy.require(request.user, request.workspace, permission, project_id=project.pk)
    return project


def memberships_in(request: Request) -> QuerySet:
    return Membership.objects.in_workspace(request.workspace)


class MembershipCreate(Endpoint):
    """Adds an account to the `X-Workspace` workspace, workspace-wide or in one project, with `role_ids`:
    roles of this workspace, covered by the caller's own grants (else 403 `cannot grant permissions you do not
    hold`). For another account, unless the caller is an operator, the membership is `invited` whatever
    `status` says and the account is e-mailed a link to accept it (valid 7 days, once). A project-scope grant
    reaches its own project."""

    summary = "Add an account to the workspace"
    permission = "memberships:create"
    workspace_scoped = True
    project_scoped = True
    request_serializer = serializers.MembershipCreateRequest
    response_serializer = serializers.MembershipSerializer
    example_request = {
        "account_id": "e4b8d2f6-3a5c-4e7b-9d1f-6c8a2e4b0d93",
        "scope": "project",
        "status": "invited",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "tags": ["contractor"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        # The account, then the place, then the roles: each refusal before the next.
        account = Account.objects.filter(pk=data["account_id"]).first()
        if account is None:
            raise ApiError(400, "account_id must name an existing account", "account_id")
        project = membership_place(request, data.get("project_id"), permission=self.permission)
        roles = roles_named(request, data["role_ids"])
        membership = create_membership(
            request.workspace,
            **changes_of(data, "account_id", "project_id", "role_ids"),
            account=account,
            project=project,
            roles=roles,
            actor=request.user,
        )
        return answer_fresh(request, self.response_serializer, memberships_in(request), membership)


class MembershipDescribe(Endpoint):
    """A membership of the `X-Workspace` workspace by `id`, with its roles; a project-scope grant of
    `memberships:describe` reaches the memberships of its own project."""

    summary = "Describe a membership"
    permission = "memberships:describe"
    workspace_scoped = True
    project_scoped = True
    read_only = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.MembershipSerializer
    example_request = {"id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        membership = get_object(
            request, memberships_in(request), permission=self.permission, project_scoped=True, pk=data["id"]
        )
        return answer_fresh(request, self.response_serializer, memberships_in(request), membership)


class MembershipList(ListEndpoint):
    """The memberships of the `X-Workspace` workspace, each with its roles; a caller whose grant is
    project-scope sees those of its own projects."""

    summary = "List the workspace's memberships"
    permission = "memberships:list"
    workspace_scoped = True
    project_scoped = True
    list_key = "memberships"
    response_serializer = serializers.MembershipSerializer
    filter_fields = {
        name: name for name in ("id", "account_id", "workspace_id", "scope", "status", "project_id")
    }
    example_request = {
        "filter": {"fields": {"status": "active", "scope": "workspace"}},
        "options": {"limit": 100, "order_bys": ["!created_at"]},
    }

    def get_queryset(self, request: Request) -> QuerySet:
        return in_visible_projects(request, memberships_in(request), permission=self.permission)


class MembershipUpdate(Endpoint):
    """Changes a membership named by `id`: its scope and project, status, `role_ids` (replaces its roles; each
    must be covered by the caller's own grants) and meta. Only the invited account can make an invited
    membership `active` (else 403 `only the invited account can accept`); an accepted one may be suspended and
    reactivated."""

    summary = "Change a membership"
    permission = "memberships:update"
    workspace_scoped = True
    project_scoped = True
    request_serializer = serializers.MembershipUpdateRequest
    response_serializer = serializers.MembershipSerializer
    example_request = {
        "id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64",
        "role_ids": ["5a1f3c7e-9b2d-4f6a-b8c4-1e3d5f7a9c26"],
        "status": "suspended",
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        membership = get_object(
            request, memberships_in(request), permission=self.permission, project_scoped=True, pk=data["id"]
        )
        # The place it moves to, then the roles: each refusal before the next.
        changes = changes_of(data, "id", "project_id", "role_ids")
        if "project_id" in data:
            changes["project"] = membership_place(request, data["project_id"], permission=self.permission)
        elif changes.get("scope") == Membership.Scope.WORKSPACE:
            membership_place(request, None, permission=self.permission)
        if "role_ids" in data:
            changes["roles"] = roles_named(request, data["role_ids"])
        update_membership(membership, **changes, actor=request.user)
        return answer_fresh(request, self.response_serializer, memberships_in(request), membership)


class MembershipDelete(Endpoint):
    """Removes a membership named by `id`: the account loses its roles there at once. A project-scope
    grant reaches the memberships of its own project."""

    summary = "Remove a membership"
    permission = "memberships:delete"
    workspace_scoped = True
    project_scoped = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.Deleted
    example_request = {"id": "7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64"}

    def handle(self, request: Request, data: dict) -> dict:
        membership = get_object(
            request, memberships_in(request), permission=self.permission, project_scoped=True, pk=data["id"]
        )
        return delete_membership(membership, actor=request.user)


INVITATION_NOT_FOUND = "invitation not found"


class InviteeEndpoint(Endpoint):
    public = True  # the e-mailed token is the credential; a Bearer token is optional
    request_serializer = serializers.InvitationRequest

    def get_authenticators(self):
        return [BearerAuthentication()]

    def claims(self, data: dict, claim: str) -> tuple[dict, UUID]:
        """The claims of the e-mailed token, and the id it names under `claim`."""
        try:
            claims = tokens.decode(data["token"], types={tokens.MEMBERSHIP_INVITE})
            return claims, UUID(str(claims.get(claim)))
        except (TokenError, ValueError) as exc:
            raise ApiError(401, AUTHENTICATION_REQUIRED) from exc

    def signed_in_id(self, request: Request, data: dict) -> UUID:
        if request.user is None:
            raise ApiError(400, "token required", "token")
        if "id" not in data:
            raise ApiError(400, "id required", "id")
        return data["id"]


# Invited memberships


class MembershipInvitationEndpoint(InviteeEndpoint):
    def invitation(self, request: Request, data: dict) -> Membership:
        if "token" in data:
            claims, _ = self.claims(data, "mid")
            # Single use: a link names one invitation, which it can accept or decline only while it is
            # open and was never accepted.
            membership = linked_membership(claims)
        else:
            invited = Membership.objects.filter(status=Membership.Status.INVITED).select_related("account")
            membership = invited.filter(
                pk=self.signed_in_id(request, data), account_id=request.user.pk
            ).first()
        if membership is None:
            raise ApiError(404, "membership not found")
        return membership


class MembershipAccept(MembershipInvitationEndpoint):
    """Accepts an invitation: with its `token` (no Bearer), or with Bearer and the `id` of the caller's
    own invited membership, which becomes `active`. Anything else is 404. A disabled account accepts
    nothing (403). An account that was never verified accepting by its link also sends a new `password`:
    the account becomes verified, its earlier password and other credentials are revoked, its second
    factors and recovery codes removed and every session it had ends (whoever registered the address
    without its mailbox is shut out)."""

    summary = "Accept a membership one was invited to"
    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}

    response_serializer = serializers.MembershipSerializer

    def handle(self, request: Request, data: dict) -> Any:
        membership = self.invitation(request, data)
        account = membership.account
        authn.require_enabled(account)
        if "token" in data and not account.verified:
            if not data.get("password"):
                raise ApiError(400, "password required", "password")
            authn.check_password_rules(data["password"], account)
            authn.reclaim_account(account, password=data["password"], actor=account)
        membership = accept_invitation(membership)
        return answer_fresh(request, self.response_serializer, Membership.objects.all(), membership)


class MembershipDecline(MembershipInvitationEndpoint):
    """Declines an invitation, with the same inputs as `memberships/accept`: the membership is deleted.
    Answers its `id`."""

    summary = "Decline a membership one was invited to"
    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}

    response_serializer = serializers.Deleted

    def handle(self, request: Request, data: dict) -> dict:
        return decline_invitation(self.invitation(request, data))
