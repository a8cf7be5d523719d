"""Invitations by e-mail (docs/api.md#invitations) and the invitation findings of
docs/security.md#consent-nobody-is-put-into-a-workspace (pre-registration hijack, disabled accounts, audit
entries, `permissions/check`), over HTTP.

Workspace A invites; workspace B is someone else's, and never sees or accepts A's invitations. E-mails go
through the outbox after commit: `send_outbox()` does what the worker does."""

import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Account
from authn import tokens
from authn.models import Credential
from iam.models import AuditEntry, Event, OutboxMessage
from iam.platform import outbox
from rbac.models import Invitation, Membership
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import (
    PASSWORD,
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

META = {"schema_version": "1"}
AUTH = "Authentication required or invalid credentials."
NEW_PASSWORD = "a brand new passphrase"
INVITATION_KEYS = {
    "id",
    "workspace_id",
    "email",
    "scope",
    "project_id",
    "roles",
    "status",
    "invited_by",
    "membership_id",
    "created_at",
    "expires_at",
    "accepted_at",
}


@pytest.fixture
def tenant(member_of):
    """Workspace A, whose owner invites, with a role to give; workspace B, someone else's."""
    a, b = WorkspaceFactory(slug="tenant-a", name="Acme"), WorkspaceFactory(slug="tenant-b")
    owner, owner_api = member_of(a, "*")
    _, other_api = member_of(b, "*")
    role = RoleFactory(workspace=a, permissions=["projects:list"])
    return a, b, owner, owner_api, other_api, role


def invite(api, role, email="invitee@example.com", **body) -> dict:
    return ok(
        api.call(
            "/invitations/create", {"email": email, "scope": "workspace", "role_ids": [str(role.pk)], **body}
        )
    )


def send_outbox() -> None:
    for message in OutboxMessage.objects.filter(topic="email", status="pending"):
        outbox.process(message.pk)


def mails_to(address: str) -> list:
    return [message for message in mail.outbox if message.to == [address]]


def token_mailed_to(address: str) -> str:
    send_outbox()
    message = mails_to(address)[-1]
    link = next(line for line in message.body.splitlines() if "accept-invitation" in line)
    return parse_qs(urlsplit(link.strip()).query)["token"][0]


def verified(email: str) -> Account:
    account = AccountFactory(email=email)
    CredentialFactory(account=account)
    return account


def events(kind: str, account) -> list[dict]:
    return [
        message.payload
        for message in Event.objects.filter(payload__type=kind)
        if str(account.pk) in message.payload["data"]["account_ids"]
    ]


# Creating


def test_create_answers_the_invitation_and_mails_after_commit(tenant, member_of):
    a, _, owner, owner_api, _, role = tenant
    data = invite(owner_api, role, email="Invitee@Example.com", tags=["x"], meta=META)
    assert set(data) == INVITATION_KEYS
    assert data["email"] == "invitee@example.com" and data["status"] == "pending"
    assert (data["workspace_id"], data["invited_by"]) == (str(a.pk), str(owner.pk))
    assert [r["id"] for r in data["roles"]] == [str(role.pk)] and data["roles"][0]["permissions"]
    assert (data["membership_id"], data["accepted_at"], data["project_id"]) == (None, None, None)
    invitation = Invitation.objects.get(pk=data["id"])
    assert invitation.expires_at - invitation.created_at == timedelta(days=7)
    assert mail.outbox == []  # never inside the request
    token = token_mailed_to("invitee@example.com")
    claims = tokens.decode(token, types={tokens.MEMBERSHIP_INVITE})
    assert claims["iid"] == data["id"] and claims["exp"] - claims["iat"] == 7 * 24 * 3600
    message = mails_to("invitee@example.com")[0]
    assert 'the workspace "Acme"' in message.body and message.subject == "You are invited to a workspace"


def test_known_and_unknown_addresses_get_the_same_answer_and_the_same_work(tenant):
    _, _, _, owner_api, _, role = tenant
    verified("known@example.com")
    invite(owner_api, role, email="warm-up@example.com")  # the caller's grants are cached from here
    answers, counts = [], []
    for address in ("known@example.com", "nobody@example.com"):
        with CaptureQueriesContext(connection) as captured:
            answers.append(invite(owner_api, role, email=address))
        counts.append(len(captured.captured_queries))
    strip = ("id", "email", "created_at", "expires_at")
    assert [{k: v for k, v in answer.items() if k not in strip} for answer in answers] == [
        {k: v for k, v in answers[0].items() if k not in strip}
    ] * 2
    assert counts[0] == counts[1]
    send_outbox()
    assert len(mails_to("known@example.com")) == len(mails_to("nobody@example.com")) == 1


def test_create_validates_its_references_within_the_workspace(tenant):
    a, b, _, owner_api, _, role = tenant
    foreign_role = RoleFactory(workspace=b)
    foreign_project = ProjectFactory(workspace=b)
    body = {"email": "x@example.com", "scope": "workspace", "role_ids": [str(foreign_role.pk)]}
    err(owner_api.call("/invitations/create", body), 400, "role_ids must name roles of this workspace")
    body = {**body, "role_ids": [str(role.pk)], "scope": "project", "project_id": str(foreign_project.pk)}
    err(owner_api.call("/invitations/create", body), 400, "project_id must name a project of this workspace")
    err(owner_api.call("/invitations/create", {**body, "project_id": None}), 400, "project_id required")
    err(
        owner_api.call("/invitations/create", {**body, "email": "not an address"}),
        400,
        "invalid email",
    )
    err(owner_api.call("/invitations/create", {"scope": "workspace", "role_ids": []}), 400, "email required")
    project = ProjectFactory(workspace=a)
    data = ok(owner_api.call("/invitations/create", {**body, "project_id": str(project.pk)}))
    assert (data["scope"], data["project_id"]) == ("project", str(project.pk))


def test_the_permission_and_the_escalation_rule(tenant, member_of):
    a, _, _, _, _, role = tenant
    _, lister = member_of(a, "projects:list")
    err(lister.call("/invitations/create", {}), 403, "missing permission invitations:create")
    _, inviter = member_of(a, "invitations:create", "projects:list")
    wider = RoleFactory(workspace=a, permissions=["projects:*"])
    body = {"email": "x@example.com", "scope": "workspace", "role_ids": [str(wider.pk)]}
    err(inviter.call("/invitations/create", body), 403, "cannot grant permissions you do not hold")
    assert not Invitation.objects.exists()
    ok(inviter.call("/invitations/create", {**body, "role_ids": [str(role.pk)]}))


def test_conflicts_a_pending_invitation_and_a_member(tenant):
    a, _, _, owner_api, _, role = tenant
    invite(owner_api, role)
    err(
        owner_api.call(
            "/invitations/create", {"email": "INVITEE@example.com", "scope": "workspace", "role_ids": []}
        ),
        409,
        "invitation already pending",
    )
    member = verified("member@example.com")
    MembershipFactory(account=member, workspace=a)
    err(
        owner_api.call(
            "/invitations/create", {"email": "member@example.com", "scope": "workspace", "role_ids": []}
        ),
        409,
        "already a member",
    )
    project = ProjectFactory(workspace=a)  # another place: allowed
    ok(
        owner_api.call(
            "/invitations/create",
            {
                "email": "member@example.com",
                "scope": "project",
                "project_id": str(project.pk),
                "role_ids": [],
            },
        )
    )


def test_pending_invitations_quota(tenant, settings, operator):
    a, _, _, owner_api, _, role = tenant
    settings.IAM_QUOTA_PENDING_INVITATIONS = 2
    first = invite(owner_api, role, email="one@example.com")
    invite(owner_api, role, email="two@example.com")
    err(
        owner_api.call(
            "/invitations/create", {"email": "three@example.com", "scope": "workspace", "role_ids": []}
        ),
        403,
        "quota reached: pending invitations (2)",
    )
    ok(owner_api.call("/invitations/revoke", {"id": first["id"]}))  # a revoked one no longer counts
    invite(owner_api, role, email="three@example.com")
    ok(
        client_for(operator, a).call(
            "/invitations/create", {"email": "four@example.com", "scope": "workspace", "role_ids": []}
        )
    )


# Reading and revoking


def test_list_filters_describe_and_another_workspace(tenant):
    a, b, _, owner_api, other_api, role = tenant
    project = ProjectFactory(workspace=a)
    one = invite(owner_api, role, email="one@example.com")
    two = invite(owner_api, role, email="two@example.com", scope="project", project_id=str(project.pk))
    three = invite(owner_api, role, email="three@example.com")
    ok(owner_api.call("/invitations/revoke", {"id": three["id"]}))
    Invitation.objects.filter(pk=one["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    theirs = invite(other_api, RoleFactory(workspace=b), email="one@example.com")

    def ids(fields=None, **options):
        body = {"filter": {"fields": fields or {}}, "options": options}
        return [item["id"] for item in ok(owner_api.call("/invitations/list", body))["invitations"]]

    assert ids() == [three["id"], two["id"], one["id"]]
    assert ids({"email": "ONE@example.com"}) == [one["id"]]
    assert ids({"status": "expired"}) == [one["id"]]
    assert ids({"status": "pending"}) == [two["id"]]
    assert ids({"status": "revoked"}) == [three["id"]]
    assert ids({"scope": "project"}) == ids({"project_id": str(project.pk)}) == [two["id"]]
    assert ids({"id": theirs["id"]}) == []
    assert ids(order_bys="email") == [one["id"], three["id"], two["id"]]
    err(
        owner_api.call("/invitations/list", {"filter": {"fields": {"status": "bogus"}}}),
        400,
        "invalid value for filter field: status",
    )
    err(
        owner_api.call("/invitations/list", {"filter": {"fields": {"workspace": "x"}}}),
        400,
        "unknown filter field: workspace",
    )
    assert ok(owner_api.call("/invitations/describe", {"id": one["id"]}))["status"] == "expired"
    for path in ("/invitations/describe", "/invitations/revoke"):
        err(owner_api.call(path, {"id": theirs["id"]}), 404, "invitation not found")
    err(
        owner_api.call("/invitations/revoke", {"id": three["id"]}),
        400,
        "only a pending invitation can be revoked",
    )
    err(
        owner_api.call("/invitations/revoke", {"id": one["id"]}),
        400,
        "only a pending invitation can be revoked",
    )


def test_lists_read_a_fixed_number_of_queries(tenant, member_of, django_assert_max_num_queries):
    a, _, _, owner_api, _, _ = tenant
    invitee = verified("many@example.com")
    for n in range(12):
        invite(
            owner_api,
            RoleFactory(workspace=a, permissions=[f"r{n}:read", f"r{n}:write"]),
            email=f"u{n}@example.com",
        )
        workspace = WorkspaceFactory()
        _, api = member_of(workspace, "*")
        invite(api, RoleFactory(workspace=workspace, permissions=["x:y"]), email="many@example.com")
        MembershipFactory(
            account=invitee, workspace=WorkspaceFactory(), status="invited", roles=[RoleFactory()]
        )
    mine = client_for(invitee)
    for limit in (1, 5, 24):
        with django_assert_max_num_queries(9):
            data = ok(owner_api.call("/invitations/list", {"options": {"limit": limit}}))
        assert len(data["invitations"]) == min(limit, 12)
        with django_assert_max_num_queries(8):
            data = ok(mine.call("/invitations/mine", {"options": {"limit": limit}}))
        assert len(data["invitations"]) == min(limit, 24) and data["metadata"]["total"] == 24


def test_a_revoked_or_expired_invitation_opens_nothing(api, tenant):
    _, _, _, owner_api, _, role = tenant
    revoked = invite(owner_api, role, email="r@example.com")
    revoked_token = token_mailed_to("r@example.com")
    ok(owner_api.call("/invitations/revoke", {"id": revoked["id"]}))
    expired = invite(owner_api, role, email="e@example.com")
    expired_token = token_mailed_to("e@example.com")
    Invitation.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    for token in (revoked_token, expired_token):
        body = {"token": token, "password": NEW_PASSWORD, "name": "N"}
        err(api.call("/invitations/accept", body), 404, "invitation not found")
        err(api.call("/invitations/decline", body), 404, "invitation not found")
    assert not Account.objects.filter(email__in=["r@example.com", "e@example.com"]).exists()
    invite(owner_api, role, email="e@example.com")  # an expired one makes room for a new one


# Accepting by the link


def test_a_verified_account_accepts_by_the_link_once(api, tenant):
    a, b, _, owner_api, _, role = tenant
    invitee = verified("invitee@example.com")
    data = invite(owner_api, role)
    token = token_mailed_to("invitee@example.com")
    answer = ok(api.call("/invitations/accept", {"token": token}))
    assert set(answer) == {"invitation", "membership"}
    invitation, membership = answer["invitation"], answer["membership"]
    assert (invitation["id"], invitation["status"], invitation["membership_id"]) == (
        data["id"],
        "accepted",
        membership["id"],
    )
    assert invitation["accepted_at"]
    assert (membership["account_id"], membership["workspace_id"], membership["status"]) == (
        str(invitee.pk),
        str(a.pk),
        "active",
    )
    assert [r["id"] for r in membership["roles"]] == [str(role.pk)]
    assert events("membership.created", invitee)  # through the membership service, as ever
    ok(client_for(invitee, a).call("/projects/list"))
    err(client_for(invitee, b).call("/projects/list"), 403, "not a member of this workspace")
    err(api.call("/invitations/accept", {"token": token}), 404, "invitation not found")  # single use
    err(api.call("/invitations/decline", {"token": token}), 404, "invitation not found")


def test_no_account_needs_a_password_and_a_name_and_gets_a_verified_one(api, tenant):
    a, _, _, owner_api, _, role = tenant
    invite(owner_api, role, email="new@example.com")
    token = token_mailed_to("new@example.com")
    err(api.call("/invitations/accept", {"token": token}), 400, "password required")
    err(api.call("/invitations/accept", {"token": token, "password": NEW_PASSWORD}), 400, "name required")
    err(
        api.call("/invitations/accept", {"token": token, "password": "short", "name": "N"}),
        400,
        "password must have at least 8 characters",
    )
    answer = ok(
        api.call("/invitations/accept", {"token": token, "password": NEW_PASSWORD, "name": "New One"})
    )
    account = Account.objects.get(email="new@example.com")
    assert account.verified and account.name == "New One"
    assert answer["membership"]["account_id"] == str(account.pk)
    ok(ApiClient(answer["access_token"], str(a.pk)).call("/projects/list"))
    # Accepting is a login: its session is recorded like any other, as a password sign-in.
    (session,) = ok(ApiClient(answer["access_token"]).call("/sessions/list"))["sessions"]
    assert (session["account_id"], session["amr"]) == (str(account.pk), ["pwd"])
    assert session["ip"] == "127.0.0.1"
    assert ok(api.call("/auth/refresh", headers={"Authorization": f"Bearer {answer['refresh_token']}"}))
    ok(api.call("/auth/login", {"email": "new@example.com", "password": NEW_PASSWORD}))


def test_a_squatters_account_is_reclaimed_on_accept(api, tenant):
    """Someone registers the victim's address with a password of theirs (never verified); the
    workspace invites the address; the victim accepts from the mailbox. The squatter's session and
    password end, and only the victim's new password opens the account."""
    a, _, _, owner_api, _, role = tenant
    squatter = ok(api.call("/auth/register", {"email": "victim@example.com", "password": PASSWORD}))
    squatter_api = ApiClient(squatter["access_token"])
    ok(squatter_api.call("/accounts/describe", {"id": squatter["account"]["id"]}))
    invitation = invite(owner_api, role, email="victim@example.com")
    token = token_mailed_to("victim@example.com")
    # The squatter, signed in, cannot take the invitation: the address is not verified.
    err(squatter_api.call("/invitations/accept", {"id": invitation["id"]}), 404, "invitation not found")
    err(api.call("/invitations/accept", {"token": token}), 400, "password required")
    answer = ok(
        api.call("/invitations/accept", {"token": token, "password": NEW_PASSWORD, "name": "ignored"})
    )
    assert answer["access_token"] and answer["membership"]["account_id"] == squatter["account"]["id"]
    account = Account.objects.get(email="victim@example.com")
    assert account.verified and account.name != "ignored"
    err(squatter_api.call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)
    err(api.call("/auth/refresh", headers={"Authorization": f"Bearer {squatter['refresh_token']}"}), 401)
    err(
        api.call("/auth/login", {"email": "victim@example.com", "password": PASSWORD}),
        401,
        "invalid credentials",
    )
    ok(api.call("/auth/login", {"email": "victim@example.com", "password": NEW_PASSWORD}))
    ok(ApiClient(answer["access_token"], str(a.pk)).call("/projects/list"))
    revoked = AuditEntry.objects.filter(
        action="credential.update", resource_id__in=Credential.objects.filter(account=account).values("pk")
    )
    assert revoked.filter(changes__status__after="revoked").exists()


def test_the_older_membership_link_gets_the_same_defence(api, tenant):
    _a, _, _, owner_api, _, role = tenant
    squatter = ok(api.call("/auth/register", {"email": "victim@example.com", "password": PASSWORD}))
    body = {
        "account_id": squatter["account"]["id"],
        "scope": "workspace",
        "status": "active",
        "role_ids": [str(role.pk)],
        "tags": [],
        "meta": META,
    }
    membership = ok(owner_api.call("/memberships/create", body))
    send_outbox()
    (message,) = [m for m in mails_to("victim@example.com") if "invited" in m.subject]
    token = re.search(r"token=(\S+)", message.body).group(1)
    err(api.call("/memberships/accept", {"token": token}), 400, "password required")
    data = ok(api.call("/memberships/accept", {"token": token, "password": NEW_PASSWORD}))
    assert (data["id"], data["status"]) == (membership["id"], "active")
    assert Account.objects.get(email="victim@example.com").verified
    err(ApiClient(squatter["access_token"]).call("/accounts/describe", {"id": data["account_id"]}), 401, AUTH)
    err(
        api.call("/auth/login", {"email": "victim@example.com", "password": PASSWORD}),
        401,
        "invalid credentials",
    )
    ok(api.call("/auth/login", {"email": "victim@example.com", "password": NEW_PASSWORD}))


def test_a_disabled_account_accepts_nothing(api, tenant):
    a, _, _, owner_api, _, role = tenant
    disabled = verified("off@example.com")
    membership = ok(
        owner_api.call(
            "/memberships/create",
            {
                "account_id": str(disabled.pk),
                "scope": "workspace",
                "status": "active",
                "role_ids": [],
                "tags": [],
                "meta": META,
            },
        )
    )
    send_outbox()
    (message,) = [m for m in mails_to("off@example.com") if "invited" in m.subject]
    membership_token = re.search(r"token=(\S+)", message.body).group(1)
    project = ProjectFactory(workspace=a)
    invite(owner_api, role, email="off@example.com", scope="project", project_id=str(project.pk))
    token = token_mailed_to("off@example.com")
    Account.objects.filter(pk=disabled.pk).update(enabled=False)
    err(api.call("/invitations/accept", {"token": token, "password": NEW_PASSWORD}), 403, "account disabled")
    err(api.call("/memberships/accept", {"token": membership_token}), 403, "account disabled")
    assert Membership.objects.get(pk=membership["id"]).status == "invited"
    assert not Membership.objects.filter(account=disabled, project=project).exists()


# Signed in, and declining


def test_signed_in_with_the_verified_address_and_nobody_else(tenant, member_of):
    _a, b, owner, owner_api, _other_api, role = tenant
    invitee = verified("invitee@example.com")
    data = invite(owner_api, role)
    stranger, _ = member_of(b, "*")
    for someone in (owner, stranger, AccountFactory(email="other@example.com")):
        err(client_for(someone).call("/invitations/accept", {"id": data["id"]}), 404, "invitation not found")
        err(client_for(someone).call("/invitations/decline", {"id": data["id"]}), 404, "invitation not found")
    err(ApiClient().call("/invitations/accept", {"id": data["id"]}), 400, "token required")
    err(client_for(invitee).call("/invitations/accept", {}), 400, "id required")
    answer = ok(client_for(invitee).call("/invitations/accept", {"id": data["id"]}))
    assert "access_token" not in answer and answer["membership"]["status"] == "active"


def test_a_token_of_one_kind_opens_nothing_else(api, tenant):
    _a, _, _, owner_api, _, role = tenant
    invitee = verified("invitee@example.com")
    invite(owner_api, role)
    token = token_mailed_to("invitee@example.com")
    err(api.call("/memberships/accept", {"token": token}), 401, AUTH)
    err(api.call("/auth/confirm", {"token": token}), 401, AUTH)
    err(ApiClient(token).call("/invitations/mine"), 401, AUTH)
    err(api.call("/invitations/accept", {"token": client_for(invitee).token}), 401, AUTH)
    err(api.call("/invitations/accept", {"token": "not-a-jwt"}), 401, AUTH)


def test_decline_and_the_audit_entries_name_the_account_and_the_invitation_only(api, tenant):
    a, _, _, owner_api, _, role = tenant
    invitee = verified("invitee@example.com")
    declined = invite(owner_api, role)
    token = token_mailed_to("invitee@example.com")
    agent = {"User-Agent": "invitee-browser/1.0"}
    data = ok(api.call("/invitations/decline", {"token": token}, headers=agent))
    assert (data["id"], data["status"]) == (declined["id"], "declined")
    err(api.call("/invitations/accept", {"token": token}), 404, "invitation not found")
    accepted = invite(owner_api, role)
    ok(client_for(invitee).call("/invitations/accept", {"id": accepted["id"]}, headers=agent))
    membership = ok(
        owner_api.call(
            "/memberships/create",
            {
                "account_id": str(invitee.pk),
                "scope": "project",
                "project_id": str(ProjectFactory(workspace=a).pk),
                "status": "active",
                "role_ids": [],
                "tags": [],
                "meta": META,
            },
        )
    )
    ok(client_for(invitee).call("/memberships/decline", {"id": membership["id"]}, headers=agent))

    entries = {
        entry.action: entry for entry in AuditEntry.objects.filter(workspace_id=a.pk, actor_id=invitee.pk)
    }
    assert {"invitation.decline", "invitation.accept", "membership.create", "membership.delete"} <= set(
        entries
    )
    for entry in entries.values():
        assert (entry.ip, entry.user_agent) == (None, ""), entry.action
        assert "invitee@example.com" not in str(entry.changes), entry.action
    assert entries["invitation.decline"].resource_id == Invitation.objects.get(pk=declined["id"]).pk
    # The inviter's own entries keep where they came from.
    assert AuditEntry.objects.filter(workspace_id=a.pk, action="invitation.create", ip="127.0.0.1").exists()


# The invitee's own list


def test_mine_lists_open_invitations_to_the_verified_address_and_invited_memberships(tenant, member_of):
    _a, b, _, owner_api, other_api, role = tenant
    invitee = verified("invitee@example.com")
    to_address = invite(owner_api, role)
    elsewhere = invite(other_api, RoleFactory(workspace=b), email="invitee@example.com")
    invite(owner_api, role, email="someone-else@example.com")
    revoked = invite(
        other_api,
        RoleFactory(workspace=b),
        email="invitee@example.com",
        scope="project",
        project_id=str(ProjectFactory(workspace=b).pk),
    )
    ok(other_api.call("/invitations/revoke", {"id": revoked["id"]}))
    c = WorkspaceFactory()
    invited = MembershipFactory(
        account=invitee, workspace=c, status="invited", roles=[RoleFactory(workspace=c)]
    )
    MembershipFactory(account=invitee, workspace=WorkspaceFactory())  # accepted: not an invitation

    mine = client_for(invitee)
    data = ok(mine.call("/invitations/mine"))
    assert data["metadata"]["total"] == 3
    assert {item["id"] for item in data["invitations"]} == {
        to_address["id"],
        elsewhere["id"],
        str(invited.pk),
    }
    shaped = next(item for item in data["invitations"] if item["id"] == str(invited.pk))
    assert set(shaped) == INVITATION_KEYS and (shaped["status"], shaped["membership_id"]) == (
        "pending",
        str(invited.pk),
    )
    only_b = ok(mine.call("/invitations/mine", {"filter": {"fields": {"workspace_id": str(b.pk)}}}))
    assert [item["id"] for item in only_b["invitations"]] == [elsewhere["id"]]
    err(
        mine.call("/invitations/mine", {"filter": {"fields": {"nope": "x"}}}),
        400,
        "unknown filter field: nope",
    )
    page = ok(
        mine.call("/invitations/mine", {"options": {"limit": 2, "offset": 2, "order_bys": "created_at"}})
    )
    assert page["metadata"]["count"] == 1
    # An account whose address is not verified sees only its invited memberships.
    squatter = AccountFactory(email="unverified@example.com", verified=False)
    invite(owner_api, role, email="unverified@example.com")
    assert ok(client_for(squatter).call("/invitations/mine"))["invitations"] == []
    err(ApiClient().call("/invitations/mine"), 401, AUTH)
    # Accepting the invited membership by its id, as `mine` lists it.
    answer = ok(mine.call("/invitations/accept", {"id": str(invited.pk)}))
    assert answer["membership"]["status"] == "active" and answer["invitation"]["id"] == str(invited.pk)


def test_mine_is_filtered_counted_ordered_and_paged_by_the_database(tenant, member_of):
    """Both kinds in one query (docs/api.md#quotas-and-budgets: a caller invited by any number of workspaces
    costs a page, never the whole set): its filters, its order with ties and absent values, its pages; another
    account's invitations never appear."""
    _a, b, _, owner_api, other_api, role = tenant
    invitee = verified("invitee@example.com")
    expected = [invite(owner_api, role)["id"], invite(other_api, RoleFactory(workspace=b))["id"]]
    project = ProjectFactory(workspace=b)
    in_project = invite(other_api, RoleFactory(workspace=b), scope="project", project_id=str(project.pk))[
        "id"
    ]
    expected.append(in_project)
    for _ in range(3):
        c = WorkspaceFactory()
        expected.append(str(MembershipFactory(account=invitee, workspace=c, status="invited").pk))
    invite(owner_api, role, email="someone-else@example.com")  # another address: never listed
    MembershipFactory(account=AccountFactory(), workspace=WorkspaceFactory(), status="invited")
    mine = client_for(invitee)

    def ids(body: dict) -> list[str]:
        return [item["id"] for item in ok(mine.call("/invitations/mine", body))["invitations"]]

    assert sorted(ids({})) == sorted(expected)
    assert ids({"filter": {"fields": {"scope": "project"}}}) == [in_project]
    assert ids({"filter": {"fields": {"project_id": str(project.pk)}}}) == [in_project]
    assert sorted(ids({"filter": {"fields": {"project_id": None}}})) == sorted(set(expected) - {in_project})
    assert sorted(ids({"filter": {"fields": {"status": "pending"}}})) == sorted(expected)
    assert ids({"filter": {"fields": {"status": "accepted"}}}) == []
    assert ids({"filter": {"fields": {"id": "not-an-id"}}}) == []
    assert ids({"filter": {"fields": {"id": expected[-1].upper()}}}) == [expected[-1]]
    assert ids({"filter": {"fields": {"workspace_id": str(b.pk), "scope": "workspace"}}}) == [expected[1]]
    # Pages of one order cover every record once, in that order; absent values first going up.
    orders = (["!created_at"], ["project_id"], ["!project_id", "scope"], ["id"], ["status"], ["!status"])
    for order in orders:
        whole = ids({"options": {"order_bys": order}})
        paged = [
            item
            for offset in range(0, 6, 4)
            for item in ids({"options": {"order_bys": order, "limit": 4, "offset": offset}})
        ]
        assert paged == whole and sorted(whole) == sorted(expected)
    assert ids({"options": {"order_bys": ["project_id"]}})[-1] == in_project
    assert ids({"options": {"order_bys": ["!project_id"]}})[0] == in_project
    assert ids({"options": {"order_bys": ["id"]}}) == sorted(expected)
    assert ids({"options": {"order_bys": ["status"]}}) == sorted(expected)  # one value: ties by id
    assert ids({"options": {"order_bys": ["!status"]}}) == sorted(expected, reverse=True)
    # The page is cut where the rows are: the one query over both kinds carries the limit and the offset.
    with CaptureQueriesContext(connection) as queries:
        assert len(ids({"options": {"limit": 2, "offset": 1}})) == 2
    union = [query["sql"] for query in queries if "UNION" in query["sql"]]
    assert any("LIMIT 2" in sql and "OFFSET 1" in sql for sql in union), union


# Mails never carry a name that can pass for a link or a paragraph


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("Ada Lovelace", "Ada Lovelace"),
        ("Ada\n\nYour account is locked.\rCall us", "Ada Your account is locked. Call us"),
        ("Ada\u2028Lovelace\u200b", "Ada Lovelace"),
        ("Ada, visit https://evil.example/login", None),
        ("Support at evil.example", None),
        ("\uff25vil\uff0e\uff43\uff4f\uff4d", None),
        ("www.evil", None),
        ("10.0.0.1", None),
        ("mail me: a@b", None),
        ("javascript:alert(1)", None),
        ("x" * 200, "x" * 63 + "\u2026"),
    ],
)
def test_names_in_mails(api, member_of, name, shown, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        ok(api.call("/auth/register", {"email": "reg@example.com", "password": PASSWORD, "name": name}))
    (confirm,) = mails_to("reg@example.com")
    a = WorkspaceFactory(name=name)
    _, api_a = member_of(a, "*")
    invite(api_a, RoleFactory(workspace=a), email="inv@example.com")
    send_outbox()
    (invitation,) = mails_to("inv@example.com")
    greeting = confirm.body.splitlines()[0]
    invited_line = next(line for line in invitation.body.splitlines() if "You are invited" in line)
    html_confirm, html_invitation = confirm.alternatives[0][0], invitation.alternatives[0][0]
    if shown is None:
        assert greeting == "Hello,"
        assert "You are invited to join a workspace." in invited_line
    else:
        assert greeting == f"Hello {shown},"
        assert f'the workspace "{shown}"' in invited_line
        assert f"<strong>{shown}</strong>" in html_invitation or "&" in shown
    for body in (confirm.body, invitation.body, html_confirm, html_invitation):
        assert "evil" not in body.lower() and "locked.\n" not in body


def test_accepting_where_an_invited_membership_waits_accepts_that_membership(tenant):
    """An account invited by id (`memberships/create`) and by address to the same place: accepting the
    invitation by address accepts the membership, with the roles of both (`membership.updated`)."""
    a, _, _, owner_api, _, role = tenant
    invitee = verified("invitee@example.com")
    first = RoleFactory(workspace=a)
    body = {
        "account_id": str(invitee.pk),
        "scope": "workspace",
        "status": "active",
        "role_ids": [str(first.pk)],
    }
    membership = ok(owner_api.call("/memberships/create", {**body, "tags": [], "meta": META}))
    invitation = invite(owner_api, role)
    answer = ok(client_for(invitee).call("/invitations/accept", {"id": invitation["id"]}))
    assert answer["membership"]["id"] == membership["id"] == answer["invitation"]["membership_id"]
    assert {r["id"] for r in answer["membership"]["roles"]} == {str(first.pk), str(role.pk)}
    assert events("membership.updated", invitee)
    assert Membership.objects.filter(account=invitee).count() == 1
    err(
        owner_api.call(
            "/invitations/create", {"email": "invitee@example.com", "scope": "workspace", "role_ids": []}
        ),
        409,
        "already a member",
    )
