"""`invitations/create|describe|list|revoke`, and the invitee's side.

The invitee's side of invitations (docs/api.md#invitations): accepting and declining, by the link of the
invitation e-mail (`{"token"}`, no Bearer) or signed in (`Bearer` + `{"id"}`), and the caller's own open
invitations (`invitations/mine`). No `X-Workspace`, no permission: what is accepted must be the caller's own
and still open, else 404.

Two kinds: an invited membership (`memberships/create` of an existing account, accepted through
`memberships/*`), and an invitation by e-mail address (`invitations/create`, accepted through
`invitations/*`, which also accept a caller's invited membership by its id, as `invitations/mine` lists
both)."""

from collections.abc import Iterator
from typing import Any, ClassVar
from uuid import UUID

from django.db.models import F, QuerySet, Value
from rest_framework.request import Request

from accounts.models import Account
from authn import services as authn
from iam.http.encoder import FIRST_READ, Encoder
from iam.http.endpoint import EncodedJson, Endpoint, answer_fresh, encoded_object
from iam.http.errors import ApiError
from iam.http.list_endpoint import ListEndpoint, encoded_page
from iam.http.serializers import changes_of
from iam.platform.addresses import client_ip, user_agent

from .. import serializers
from ..models import Invitation, Membership
from ..services.invitations import (
    accept_email_invitation,
    create_invitation,
    decline_email_invitation,
    invitations_in_status,
    linked_invitation,
    open_invitations,
    revoke_invitation,
)
from ..services.memberships import accept_invitation, decline_invitation
from .access import get_object, project_named, roles_named
from .memberships import INVITATION_NOT_FOUND, InviteeEndpoint

# Invitations by e-mail (accept, decline and the invitee's own list: rbac/api/invitations.py)


def invitations_in(request: Request) -> QuerySet:
    return Invitation.objects.in_workspace(request.workspace)


class InvitationCreate(Endpoint):
    """Invites an e-mail address to the `X-Workspace` workspace, workspace-wide or in one project
    (`project_id`), with `role_ids`: roles of this workspace, covered by the caller's own grants (nobody
    grants what it does not hold). The address is e-mailed a link to accept or decline, valid 7 days and
    usable once, whether or not an account holds it: the answer is the same either way. A pending
    invitation for the same address and place, or a member there already, is a conflict (409)."""

    summary = "Invite an e-mail address to the workspace"
    permission = "invitations:create"
    workspace_scoped = True
    request_serializer = serializers.InvitationCreateRequest
    response_serializer = serializers.InvitationSerializer
    example_request = {
        "email": "bob@example.com",
        "scope": "workspace",
        "role_ids": ["7a1d2c3b-4e5f-4a6b-8c9d-0e1f2a3b4c5d"],
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        project_id = data.get("project_id")
        project = None if project_id is None else project_named(request, project_id)
        roles = roles_named(request, data["role_ids"])
        invitation = create_invitation(
            request.workspace,
            **changes_of(data, "project_id", "role_ids"),
            project=project,
            roles=roles,
            actor=request.user,
        )
        return answer_fresh(request, self.response_serializer, invitations_in(request), invitation)


class InvitationDescribe(Endpoint):
    """An invitation of the `X-Workspace` workspace by `id`; one of another workspace is not found."""

    summary = "Describe an invitation"
    permission = "invitations:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.InvitationSerializer
    example_request = {"id": "3f0c6d2a-8b1e-4c5d-9a7f-2e6b1c4d8a90"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        invitation = get_object(request, invitations_in(request), permission=self.permission, pk=data["id"])
        return answer_fresh(request, self.response_serializer, invitations_in(request), invitation)


class InvitationList(ListEndpoint):
    """The invitations of the `X-Workspace` workspace, each with its roles. `status` filters by what an
    invitation is now: `pending`, `accepted`, `declined`, `revoked` or `expired` (past `expires_at`)."""

    summary = "List the workspace's invitations"
    permission = "invitations:list"
    workspace_scoped = True
    list_key = "invitations"
    response_serializer = serializers.InvitationSerializer
    filter_fields = {name: name for name in ("id", "email", "status", "scope", "project_id")}
    example_request = {"filter": {"fields": {"status": "pending"}}, "options": {"limit": 100}}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        # `status` is not a column: what an invitation is now (`expired` is a pending one past its time).
        filters = dict(data.get("filter") or {})
        fields = dict(filters.get("fields") or {})
        self.status = fields.pop("status", None)
        if "status" in filters.get("fields", {}) and self.status not in Invitation.Status.values:
            raise ApiError(400, "invalid value for filter field: status", "status")
        return super().handle(request, {**data, "filter": {**filters, "fields": fields}})

    def get_queryset(self, request: Request) -> QuerySet:
        invitations = invitations_in(request)
        if self.status is None:
            return invitations
        return invitations.filter(invitations_in_status(self.status))


class InvitationRevoke(Endpoint):
    """Withdraws a pending invitation named by `id`: its link opens nothing from then on."""

    summary = "Withdraw an invitation"
    permission = "invitations:revoke"
    workspace_scoped = True
    request_serializer = serializers.IdRequest
    response_serializer = serializers.InvitationSerializer
    example_request = {"id": "3f0c6d2a-8b1e-4c5d-9a7f-2e6b1c4d8a90"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        invitation = get_object(request, invitations_in(request), permission=self.permission, pk=data["id"])
        revoke_invitation(invitation, actor=request.user)
        return answer_fresh(request, self.response_serializer, invitations_in(request), invitation)


# Invitations by e-mail
#
# docs/api.md#quotas-and-budgets: an invitation and its membership each hold up to 50 roles of 500 permissions
# (hundreds of megabytes of JSON at their size limits), so these answers are written by
# `iam.http.encoder.Encoder` as describes are (`answer_fresh`, several in one answer by `encoded_object`), and
# `invitations/mine`'s page by `iam.http.list_endpoint.encoded_page` within its byte budget: nothing here
# builds a whole answer.


def _invited_memberships(account: Account) -> QuerySet:
    return Membership.objects.filter(account=account, status=Membership.Status.INVITED)


def _addressed_to(account: Account) -> QuerySet:
    """The open invitations to the account's address, when the account has proved it owns it."""
    if not account.verified:
        return Invitation.objects.none()
    return open_invitations(Invitation.objects.filter(email=account.email))


class EmailInvitationEndpoint(InviteeEndpoint):
    def find(self, request: Request, data: dict) -> tuple[Invitation | Membership, dict | None]:
        """The open invitation the token names (and its claims), or the caller's own (an invitation to
        its verified address, else an invited membership of its own) by `id`. Anything else: 404."""
        if "token" in data:
            claims, _ = self.claims(data, "iid")
            # Locked for the request's transaction: two uses of one link take turns, and the second finds
            # it used (before an account is made for it).
            invitation = linked_invitation(claims, lock=True)
            if invitation is None:
                raise ApiError(404, INVITATION_NOT_FOUND)
            return invitation, claims
        record_id = self.signed_in_id(request, data)
        invitation = _addressed_to(request.user).filter(pk=record_id).first()
        if invitation is not None:
            return invitation, None
        membership = _invited_memberships(request.user).filter(pk=record_id).first()
        if membership is None:
            raise ApiError(404, INVITATION_NOT_FOUND)
        return membership, None

    def answer_invitation(self, request: Request, invitation: Invitation) -> EncodedJson:
        return answer_fresh(request, serializers.InvitationSerializer, Invitation.objects.all(), invitation)

    def answer_as_invitation(self, request: Request, membership: Membership, **context: str) -> EncodedJson:
        """An invited membership in the shape of an invitation (`MembershipAsInvitation`)."""
        memberships = Membership.objects.select_related("account")
        return answer_fresh(request, serializers.MembershipAsInvitation, memberships, membership, context)

    def answer_membership(self, request: Request, membership: Membership) -> EncodedJson:
        return answer_fresh(request, serializers.MembershipSerializer, Membership.objects.all(), membership)


class InvitationAccept(EmailInvitationEndpoint):
    """Accepts an invitation, with its e-mailed `token` (no Bearer), or signed in with the `id` of an
    invitation to the caller's verified address (or of the caller's own invited membership, as
    `invitations/mine` lists it). The membership it describes becomes active.

    With the token: an account holding the address with it verified needs nothing more; when no account
    holds it, the body also carries `password` and `name`, and the account is created verified; when an
    account holds it that was never verified (anyone can register an address they do not own), the body
    carries a new `password`: the account becomes verified, its earlier password and other credentials
    are revoked, its second factors and recovery codes removed, and every session it had ends. In these
    two cases the answer also carries the `access_token` and `refresh_token` of a new session (or, for an
    account holding a second factor, `mfa_required` and an `mfa_token` for `auth/mfa/verify`). A
    disabled account accepts nothing (403). Answers the invitation and the membership."""

    summary = "Accept an invitation"
    example_request = {
        "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl",
        "password": "correct-horse-battery-staple",
        "name": "Bob",
    }
    response_serializer = serializers.InvitationAccepted

    def handle(self, request: Request, data: dict) -> EncodedJson:
        found, claims = self.find(request, data)
        if isinstance(found, Membership):
            membership = accept_invitation(found)
            return encoded_object(
                {
                    "invitation": self.answer_as_invitation(request, membership),
                    "membership": self.answer_membership(request, membership),
                }
            )
        session = None
        if claims is not None:
            account, session = authn.invited_account(
                found.email,
                password=data.get("password"),
                name=data.get("name"),
                ip=client_ip(request),
                user_agent=user_agent(request),
            )
        else:
            account = request.user
        invitation, membership = accept_email_invitation(found, account=account)
        answer = {
            "invitation": self.answer_invitation(request, invitation),
            "membership": self.answer_membership(request, membership),
        }
        return encoded_object(answer if session is None else answer | session)


class InvitationDecline(EmailInvitationEndpoint):
    """Declines an invitation, with the same inputs as `invitations/accept` (no password or name): it
    becomes `declined` (an invited membership is deleted). Answers the invitation."""

    summary = "Decline an invitation"
    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}
    response_serializer = serializers.InvitationSerializer

    def handle(self, request: Request, data: dict) -> EncodedJson:
        found, claims = self.find(request, data)
        if isinstance(found, Membership):
            # Its row (and the ids of its roles) read before it is deleted; the roles, which stay, as the
            # answer is written.
            shaped = self.answer_as_invitation(request, found, status=Invitation.Status.DECLINED)
            decline_invitation(found)
            return shaped
        # The link's holder: the account of the address, when there is one.
        account = Account.objects.filter(email=found.email).first() if claims is not None else request.user
        return self.answer_invitation(request, decline_email_invitation(found, account=account))


class InvitationMine(ListEndpoint):
    """The caller's open invitations: those to its verified address, and its invited memberships, each
    in the shape of an invitation (an invited membership's `id` is the membership's). Accept or decline
    them with `invitations/accept` and `invitations/decline` and the `id`."""

    summary = "List the caller's open invitations"
    example_request = {"filter": {"fields": {"scope": "workspace"}}, "options": {"limit": 100}}
    list_key = "invitations"
    response_serializer = serializers.InvitationSerializer
    filter_fields: ClassVar[dict[str, str]] = {
        name: name for name in ("id", "workspace_id", "status", "scope", "project_id")
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        """The list contract over two tables: both sets are the caller's own, their filter and order
        fields read in a fixed number of queries, then filtered, ordered and paged here by the same
        rules; the page's records are then read a few at a time and written within the page's byte
        budget (docs/api.md#lists, #quotas-and-budgets: `encoded_page`), each by the encoder of its kind."""
        filters = data.get("filter", {})
        options = data.get("options", {})
        limit, offset = options.get("limit", 100), options.get("offset", 0)
        wanted = {}
        for name, value in filters.get("fields", {}).items():
            if name not in self.filter_fields:
                raise ApiError(400, f"unknown filter field: {name}", name)
            if value is not None and not isinstance(value, str):
                raise ApiError(400, f"invalid value for filter field: {name}", name)
            wanted[name] = value
        order_bys = options.get("order_bys") or [self.default_order]
        for item in order_bys:
            name = item.removeprefix("!")
            if name not in self.filter_fields and name not in self.order_fields:
                raise ApiError(400, f"unknown filter field: {name}", "options.order_bys")

        found = _open_invitations(request.user, wanted) if not filters.get("tags") else None
        if found is None:  # neither kind is tagged: a tags filter matches none
            total, page = 0, []
        else:
            ordering = [
                F(item.removeprefix("!")).desc(nulls_last=True)
                if item.startswith("!")
                else F(item).asc(nulls_first=True)
                for item in order_bys
                if item.removeprefix("!") != "status"  # `pending` for every row: no order of its own
            ]
            last = order_bys[-1]  # ties fall to the id, in the last order's direction
            ordering.append(F("id").desc() if last.startswith("!") else F("id").asc())
            total = found.count()
            # Past the total there is no page: no query (an offset past PostgreSQL's bigint is no 500)
            rows = found.order_by(*ordering)[offset : offset + limit] if limit and offset < total else []
            page = [(KINDS[kind], str(pk)) for kind, pk, *_ in rows]
        return encoded_page(
            self.list_key,
            self._written(request, page),
            total=total,
            offset=offset,
            limit=limit,
            order_bys=order_bys,
        )

    @staticmethod
    def _written(request: Request, page: list[tuple[type, str]]) -> Iterator[tuple[Encoder, Any]]:
        """The page's records in order, each with the encoder of its kind, read FIRST_READ at a time (a
        record gone since, accepted or declined meanwhile, is left out)."""
        context = {"request": request}
        encoders = {
            Invitation: (
                Encoder(serializers.InvitationSerializer(context=context)),
                Invitation.objects.all(),
            ),
            Membership: (
                Encoder(serializers.MembershipAsInvitation(context=context)),
                Membership.objects.select_related("account"),
            ),
        }
        for start in range(0, len(page), FIRST_READ):
            batch = page[start : start + FIRST_READ]
            read = {}
            for kind, (encoder, queryset) in encoders.items():
                ids = [pk for of, pk in batch if of is kind]
                if ids:
                    rows = list(encoder.prepare(queryset.filter(pk__in=ids)))
                    encoder.load(rows)
                    read.update({(kind, str(row.pk)): row for row in rows})
            for kind, pk in batch:
                if (kind, pk) in read:
                    yield encoders[kind][0], read.pop((kind, pk))


# `invitations/mine` is one SQL query over both kinds (a UNION): filtered, counted, ordered and paged by
# PostgreSQL, so a caller invited by any number of workspaces costs a page, never the whole set.
LISTED = ("id", "workspace_id", "scope", "project_id", "created_at", "updated_at")
KINDS = {"invitation": Invitation, "membership": Membership}
UUID_FIELDS = ("id", "workspace_id", "project_id")


def _open_invitations(account: Account, wanted: dict[str, str | None]) -> QuerySet | None:
    """Both kinds of the caller's open invitations matching `wanted` (field -> value; None: no value), as
    rows of `kind` then LISTED; None when nothing can match."""
    parts = []
    for kind, found in (
        ("invitation", _addressed_to(account)),
        ("membership", _invited_memberships(account)),
    ):
        for name, value in wanted.items():
            if name == "status":  # both kinds are listed as `pending`: open invitations only
                if value != Invitation.Status.PENDING:
                    return None
            elif value is None:
                found = found.filter(**{f"{name}__isnull": True})
            elif name in UUID_FIELDS:
                try:
                    found = found.filter(**{name: UUID(value)})
                except ValueError:
                    return None  # no id is spelled so
            else:
                found = found.filter(**{name: value})
        parts.append(found.annotate(kind=Value(kind)).values_list("kind", *LISTED))
    return parts[0].union(parts[1], all=True)
