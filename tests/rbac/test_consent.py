"""docs/api.md#invitations: an account joins a workspace only by its own act. A workspace owner
added any account as an `active` member and from then on received its `session.revoked` and `account.*`
events; now the membership starts `invited`, the account is e-mailed, and only it accepts."""

from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import mail

from authn import tokens
from iam.models import Event, OutboxMessage
from iam.platform import outbox
from rbac.models import Membership
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)

META = {"schema_version": "1"}
AUTH = "Authentication required or invalid credentials."


@pytest.fixture
def tenant(member_of):
    """Workspace A, whose owner invites; workspace B, someone else's."""
    a, b = WorkspaceFactory(slug="tenant-a"), WorkspaceFactory(slug="tenant-b")
    owner, owner_api = member_of(a, "*")
    member_of(b, "*")
    return a, b, owner, owner_api


@pytest.fixture
def invitee(db):
    invitee = AccountFactory(email="invitee@example.com")
    CredentialFactory(account=invitee)
    return invitee


def invite(owner_api, account, role, status="active") -> dict:
    body = {
        "account_id": str(account.pk),
        "scope": "workspace",
        "status": status,
        "role_ids": [str(role.pk)],
        "tags": [],
        "meta": META,
    }
    return ok(owner_api.call("/memberships/create", body))


def send_outbox() -> None:
    for message in OutboxMessage.objects.filter(topic="email", status="pending"):
        outbox.process(message.pk)


def invitation_token() -> str:
    (message,) = [m for m in mail.outbox if "invited" in m.subject]
    link = next(line for line in message.body.splitlines() if "accept-invitation" in line)
    return parse_qs(urlsplit(link.strip()).query)["token"][0]


def session_events(account) -> set[str]:
    return {
        message.payload["workspace_id"]
        for message in Event.objects.filter(payload__type="session.revoked")
        if str(account.pk) in message.payload["data"]["account_ids"]
    }


@pytest.mark.parametrize("status", ["active", "suspended", "invited"])
def test_a_membership_of_another_account_starts_invited_and_grants_nothing(tenant, invitee, status):
    a, _, _, owner_api = tenant
    role = RoleFactory(workspace=a, permissions=["projects:list"])
    data = invite(owner_api, invitee, role, status)
    assert (data["status"], data["accepted_at"]) == ("invited", None)
    err(client_for(invitee, a).call("/projects/list"), 403, "not a member of this workspace")


def test_the_invitee_is_emailed_a_single_use_link_and_accepts_with_it(api, tenant, invitee):
    a, _, _, owner_api = tenant
    role = RoleFactory(workspace=a, permissions=["projects:list"])
    membership = invite(owner_api, invitee, role)
    send_outbox()
    token = invitation_token()
    claims = tokens.decode(token, types={tokens.MEMBERSHIP_INVITE})
    assert claims["exp"] - claims["iat"] == 7 * 24 * 3600
    assert tokens.decode(token, types={tokens.MEMBERSHIP_INVITE})["mid"] == membership["id"]

    data = ok(api.call("/memberships/accept", {"token": token}))
    assert (data["id"], data["status"]) == (membership["id"], "active") and data["accepted_at"]
    ok(client_for(invitee, a).call("/projects/list"))
    err(api.call("/memberships/accept", {"token": token}), 404, "membership not found")  # used
    err(api.call("/memberships/decline", {"token": token}), 404, "membership not found")


def test_an_invitation_token_opens_nothing_else(api, tenant, invitee):
    a, _, _, owner_api = tenant
    invite(owner_api, invitee, RoleFactory(workspace=a))
    send_outbox()
    token = invitation_token()
    err(ApiClient(token).call("/accounts/describe", {"id": str(invitee.pk)}), 401, AUTH)
    err(api.call("/auth/confirm", {"token": token}), 401, AUTH)
    err(api.call("/memberships/accept", {"token": tokens_of(invitee)}), 401, AUTH)  # an access token
    err(api.call("/memberships/accept", {"token": "not-a-jwt"}), 401, AUTH)


def tokens_of(account) -> str:
    return client_for(account).token


def test_decline_with_a_bearer_deletes_the_invitation(tenant, invitee):
    a, _, _, owner_api = tenant
    membership = invite(owner_api, invitee, RoleFactory(workspace=a))
    assert ok(client_for(invitee).call("/memberships/decline", {"id": membership["id"]})) == {
        "id": membership["id"]
    }
    assert not Membership.objects.filter(pk=membership["id"]).exists()
    send_outbox()
    assert not [m for m in mail.outbox if "invited" in m.subject]  # withdrawn: nothing sent


def test_nobody_else_accepts_an_invitation(tenant, invitee, member_of, operator):
    """Another account (even the workspace owner, even one of workspace B) gets 404 for it, and
    `memberships/update` cannot make it active without the account (an operator can)."""
    a, b, owner, owner_api = tenant
    membership = invite(owner_api, invitee, RoleFactory(workspace=a))
    stranger, _ = member_of(b, "*")
    for someone in (owner, stranger):
        err(
            client_for(someone).call("/memberships/accept", {"id": membership["id"]}),
            404,
            "membership not found",
        )
        err(
            client_for(someone).call("/memberships/decline", {"id": membership["id"]}),
            404,
            "membership not found",
        )
    err(
        owner_api.call("/memberships/update", {"id": membership["id"], "status": "active"}),
        403,
        "only the invited account can accept",
    )
    err(ApiClient().call("/memberships/accept", {"id": membership["id"]}), 400, "token required")
    assert Membership.objects.get(pk=membership["id"]).status == "invited"
    data = ok(
        client_for(operator, a).call("/memberships/update", {"id": membership["id"], "status": "active"})
    )
    assert data["status"] == "active" and data["accepted_at"]


def test_once_accepted_a_holder_of_memberships_update_suspends_and_reactivates(tenant, invitee):
    a, _, _, owner_api = tenant
    membership = invite(owner_api, invitee, RoleFactory(workspace=a))
    ok(client_for(invitee).call("/memberships/accept", {"id": membership["id"]}))
    ok(owner_api.call("/memberships/update", {"id": membership["id"], "status": "suspended"}))
    data = ok(owner_api.call("/memberships/update", {"id": membership["id"], "status": "active"}))
    assert data["status"] == "active"


def test_an_invitation_does_not_send_the_accounts_events_to_the_workspace(tenant, invitee):
    a, b, _, owner_api = tenant
    MembershipFactory(account=invitee, workspace=b)  # accepted long ago
    membership = invite(owner_api, invitee, RoleFactory(workspace=a))
    ok(client_for(invitee).call("/auth/revoke"))
    assert str(a.pk) not in session_events(invitee)
    assert str(b.pk) in session_events(invitee)

    Event.objects.all().delete()
    invitee.refresh_from_db()
    ok(client_for(invitee).call("/memberships/accept", {"id": membership["id"]}))
    ok(client_for(invitee).call("/auth/revoke"))
    assert str(a.pk) in session_events(invitee)


def test_an_operator_and_the_account_itself_add_directly(operator, member_of, invitee):
    a = WorkspaceFactory()
    role = RoleFactory(workspace=a)
    body = {"scope": "workspace", "status": "active", "role_ids": [str(role.pk)], "tags": [], "meta": META}
    data = ok(client_for(operator, a).call("/memberships/create", {**body, "account_id": str(invitee.pk)}))
    assert data["status"] == "active" and data["accepted_at"]
    owner, owner_api = member_of(a, "*")
    project = ok(owner_api.call("/projects/create", {"name": "P", "config": META, "tags": [], "meta": META}))
    mine = ok(
        owner_api.call(
            "/memberships/create",
            {**body, "account_id": str(owner.pk), "scope": "project", "project_id": project["id"]},
        )
    )
    assert mine["status"] == "active"


def test_invitations_to_one_address_are_mailed_at_most_ten_times_an_hour(tenant, invitee, member_of):
    """A tenant (or several) could flood an address by inviting, withdrawing and inviting again; past the
    hourly limit the invitation still stands, unmailed, and the account can accept it signed in."""
    a, b, _, owner_api = tenant
    _, other_owner = member_of(b, "*")
    for round_ in range(6):
        for api, workspace in ((owner_api, a), (other_owner, b)):
            membership = invite(api, invitee, RoleFactory(workspace=workspace))
            send_outbox()
            if round_ < 5:
                ok(api.call("/memberships/delete", {"id": membership["id"]}))
    assert len([m for m in mail.outbox if "invited" in m.subject]) == 10
    ok(client_for(invitee).call("/memberships/accept", {"id": membership["id"]}))
