"""The invitee's side of invitations (CONTRACT 15): accepting and declining, by the link of the invitation
e-mail (`{"token"}`, no Bearer) or signed in (`Bearer` + `{"id"}`), and the caller's own open invitations
(`invitations/mine`). No `X-Workspace`, no permission: what is accepted must be the caller's own and still
open, else 404.

Two kinds: an invited membership (`memberships/create` of an existing account, accepted through
`memberships/*`), and an invitation by e-mail address (`invitations/create`, accepted through
`invitations/*`, which also accept a caller's invited membership by its id, as `invitations/mine` lists
both)."""

from collections.abc import Iterator
from typing import Any, ClassVar
from uuid import UUID

from django.db.models import F, QuerySet, Value
from rest_framework import serializers
from rest_framework.request import Request

from accounts.models import Account
from authn import services as authn
from authn import tokens
from authn.authentication import BearerAuthentication
from authn.tokens import TokenError
from iam.addresses import client_ip, user_agent
from iam.api import EncodedJson, Endpoint, answer_fresh, encoded_object
from iam.errors import AUTHENTICATION_REQUIRED, ApiError
from iam.fields import Name, String, Uuid
from iam.list_endpoint import ListEndpoint, encoded_page
from iam.serializers import FIRST_READ, Encoder

from . import services
from .models import Invitation, Membership
from .serializers import Deleted, InvitationSerializer, MembershipAsInvitation, MembershipSerializer

INVITATION_NOT_FOUND = "invitation not found"


class InvitationRequest(serializers.Serializer):
    token = String(required=False, max_length=4096)
    id = Uuid(required=False)
    # Asked only when the link's holder has no verified account yet (CONTRACT 15).
    password = String(required=False, max_length=1024, trim_whitespace=False)
    name = Name(required=False)


class InviteeEndpoint(Endpoint):
    public = True  # the e-mailed token is the credential; a Bearer token is optional
    request_serializer = InvitationRequest

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
        invited = Membership.objects.filter(status=Membership.Status.INVITED).select_related("account")
        if "token" in data:
            claims, membership_id = self.claims(data, "mid")
            # Single use: a link names one invitation, which it can accept or decline only while it is
            # open and was never accepted.
            found = invited.filter(pk=membership_id, account_id=claims["sub"], accepted_at__isnull=True)
        else:
            found = invited.filter(pk=self.signed_in_id(request, data), account_id=request.user.pk)
        membership = found.first()
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

    response_serializer = MembershipSerializer

    def handle(self, request: Request, data: dict) -> Any:
        membership = self.invitation(request, data)
        account = membership.account
        authn.require_enabled(account)
        if "token" in data and not account.verified:
            if not data.get("password"):
                raise ApiError(400, "password required", "password")
            authn.check_password_rules(data["password"], account)
            authn.reclaim_account(account, password=data["password"], actor=account)
        membership = services.accept_invitation(membership)
        return answer_fresh(request, MembershipSerializer, Membership.objects.all(), membership)


class MembershipDecline(MembershipInvitationEndpoint):
    """Declines an invitation, with the same inputs as `memberships/accept`: the membership is deleted.
    Answers its `id`."""

    summary = "Decline a membership one was invited to"
    example_request = {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl"}

    response_serializer = Deleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.decline_invitation(self.invitation(request, data))


# Invitations by e-mail
#
# CONTRACT 16: an invitation and its membership each hold up to 50 roles of 500 permissions (hundreds of
# megabytes of JSON at their size limits), so these answers are written by `iam.serializers.Encoder` as
# describes are (`answer_fresh`, several in one answer by `encoded_object`), and `invitations/mine`'s
# page by `iam.list_endpoint.encoded_page` within its byte budget: nothing here builds a whole answer.


def _invited_memberships(account: Account) -> QuerySet:
    return Membership.objects.filter(account=account, status=Membership.Status.INVITED)


def _addressed_to(account: Account) -> QuerySet:
    """The open invitations to the account's address, when the account has proved it owns it."""
    if not account.verified:
        return Invitation.objects.none()
    return services.open_invitations(Invitation.objects.filter(email=account.email))


class InvitationAccepted(serializers.Serializer):
    """Documentation only: `access_token` and `refresh_token` come when the account was created or
    reclaimed by the acceptance; `mfa_required` and `mfa_token` instead of them when that account holds
    a second factor (`auth/mfa/verify` completes the sign-in)."""

    invitation = InvitationSerializer()
    membership = MembershipSerializer()
    access_token = serializers.CharField(required=False)
    refresh_token = serializers.CharField(required=False)
    mfa_required = serializers.BooleanField(required=False)
    mfa_token = serializers.CharField(required=False)


class EmailInvitationEndpoint(InviteeEndpoint):
    def find(self, request: Request, data: dict) -> tuple[Invitation | Membership, dict | None]:
        """The open invitation the token names (and its claims), or the caller's own (an invitation to
        its verified address, else an invited membership of its own) by `id`. Anything else: 404."""
        if "token" in data:
            claims, invitation_id = self.claims(data, "iid")
            # Locked for the request's transaction: two uses of one link take turns, and the second finds
            # it used (before an account is made for it).
            opened = services.open_invitations(Invitation.objects.select_for_update())
            invitation = opened.filter(pk=invitation_id).first()
            if invitation is None or claims["sub"] != invitation.pk:
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
        return answer_fresh(request, InvitationSerializer, Invitation.objects.all(), invitation)

    def answer_as_invitation(self, request: Request, membership: Membership, **context: str) -> EncodedJson:
        """An invited membership in the shape of an invitation (`MembershipAsInvitation`)."""
        memberships = Membership.objects.select_related("account")
        return answer_fresh(request, MembershipAsInvitation, memberships, membership, context)

    def answer_membership(self, request: Request, membership: Membership) -> EncodedJson:
        return answer_fresh(request, MembershipSerializer, Membership.objects.all(), membership)


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
    response_serializer = InvitationAccepted

    def handle(self, request: Request, data: dict) -> EncodedJson:
        found, claims = self.find(request, data)
        if isinstance(found, Membership):
            membership = services.accept_invitation(found)
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
        invitation, membership = services.accept_email_invitation(found, account=account)
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
    response_serializer = InvitationSerializer

    def handle(self, request: Request, data: dict) -> EncodedJson:
        found, claims = self.find(request, data)
        if isinstance(found, Membership):
            # Its row (and the ids of its roles) read before it is deleted; the roles, which stay, as the
            # answer is written.
            shaped = self.answer_as_invitation(request, found, status=Invitation.Status.DECLINED)
            services.decline_invitation(found)
            return shaped
        # The link's holder: the account of the address, when there is one.
        account = Account.objects.filter(email=found.email).first() if claims is not None else request.user
        return self.answer_invitation(request, services.decline_email_invitation(found, account=account))


class InvitationMine(ListEndpoint):
    """The caller's open invitations: those to its verified address, and its invited memberships, each
    in the shape of an invitation (an invited membership's `id` is the membership's). Accept or decline
    them with `invitations/accept` and `invitations/decline` and the `id`."""

    summary = "List the caller's open invitations"
    example_request = {"filter": {"fields": {"scope": "workspace"}}, "options": {"limit": 100}}
    list_key = "invitations"
    response_serializer = InvitationSerializer
    filter_fields: ClassVar[dict[str, str]] = {
        name: name for name in ("id", "workspace_id", "status", "scope", "project_id")
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        """The list contract over two tables: both sets are the caller's own, their filter and order
        fields read in a fixed number of queries, then filtered, ordered and paged here by the same
        rules; the page's records are then read a few at a time and written within the page's byte
        budget (CONTRACT 11 and 16: `encoded_page`), each by the encoder of its kind."""
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
            rows = found.order_by(*ordering)[offset : offset + limit] if limit else []
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
            Invitation: (Encoder(InvitationSerializer(context=context)), Invitation.objects.all()),
            Membership: (
                Encoder(MembershipAsInvitation(context=context)),
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
