"""Whom a workspace's directory reaches (docs/scim.md#who-is-a-user): it creates and links accounts only
within the domains the workspace has verified, answering the same whether or not an account has an
address (no oracle); it sees only the accounts it vouches for (its domains, or the accounts it created),
never an invitation it did not send, never an operator; and it never makes anyone a member who did not
agree, outside its own domains. Two workspaces, each with its own directory and domain."""

import pytest

from accounts.models import Account
from iam.models import AuditEntry
from rbac.models import Membership
from scim.models import ScimUser
from sso.models import SsoDomain
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import AccountFactory, CredentialFactory, MembershipFactory, RoleFactory

from .conftest import Scim, scim_err, scim_ok, user_body

OUTSIDE = "userName must be in a verified domain of this workspace"
META = {"schema_version": "1"}


def create_user(scim, email, **extra) -> dict:
    return scim_ok(scim.post("/Users", user_body(email, **extra)), 201)


def invite(owner_api, account) -> dict:
    """What any tenant can do with an account id it learnt (`clients/validate` answers them): a
    membership that waits for the account's consent."""
    body = {"account_id": str(account.pk), "scope": "workspace", "status": "active", "role_ids": []}
    membership = ok(owner_api.call("/memberships/create", {**body, "tags": [], "meta": META}))
    assert membership["status"] == "invited" and membership["accepted_at"] is None
    return membership


def unseen(scim, account) -> None:
    """The directory cannot see the account, nor change it: 404 (no body that names it), absent from
    lists and filters, no Group takes it."""
    path = f"/Users/{account.pk}"
    for response in (
        scim.get(path),
        scim.patch(path, [{"op": "replace", "path": "active", "value": True}]),
        scim.patch(path, [{"op": "Replace", "path": "active", "value": "False"}]),
        scim.put(path, user_body(account.email)),
        scim.delete(path),
    ):
        body = scim_err(response, 404)
        assert body["detail"] == "user not found" and account.email not in response.content.decode()
    listed = scim_ok(scim.get("/Users"))
    assert str(account.pk) not in {user["id"] for user in listed["Resources"]}
    assert scim_ok(scim.get("/Users", filter=f'userName eq "{account.email}"'))["totalResults"] == 0
    group = scim_ok(scim.post("/Groups", {"displayName": f"g-{account.pk}"}), 201)
    add = [{"op": "add", "path": "members", "value": [{"value": str(account.pk)}]}]
    scim_err(scim.patch(f"/Groups/{group['id']}", add), 400, "invalidValue")


# Creating and linking: only within the workspace's verified domains


def test_an_address_outside_the_verified_domains_is_refused_the_same_with_or_without_an_account(
    scim, workspace, other_scim
):
    AccountFactory(email="ceo@bigcorp.test", verified=False)
    taken = scim.post("/Users", user_body("CEO@bigcorp.test"))
    free = scim.post("/Users", user_body("cfo@bigcorp.test"))
    # Another workspace's verified domain is outside this one's.
    theirs = scim.post("/Users", user_body("someone@other.test"))
    for response in (taken, free, theirs):
        assert scim_err(response, 400, "invalidValue")["detail"] == OUTSIDE
    assert taken.content == free.content == theirs.content
    assert not Account.objects.filter(email__in=["cfo@bigcorp.test", "someone@other.test"]).exists()
    assert not Membership.objects.filter(workspace=workspace).exists()
    assert not Account.objects.get(email="ceo@bigcorp.test").verified


def test_a_self_registered_account_mints_no_account_through_its_own_workspace(db):
    """An account nobody confirmed creates a workspace, holds `*` there, issues itself a SCIM token: its
    directory still creates no account for an address in a domain it has not verified, and the real
    owner registers as usual."""
    registered = ok(
        ApiClient().call("/auth/register", {"email": "mallory@evil.test", "password": "pw-1234567!"})
    )
    mallory = ApiClient(registered["access_token"])
    body = {"name": "Evil", "slug": "evil", "config": META, "tags": [], "meta": META}
    workspace = ok(mallory.call("/workspace/create", body))
    token = ok(mallory.in_workspace(workspace["id"]).call("/scim-tokens/create", {"name": "d"}))["token"]
    directory = Scim(workspace["id"], token)
    for address in ("ceo@bigcorp.test", "mallory@evil.test"):
        assert (
            scim_err(directory.post("/Users", user_body(address)), 400, "invalidValue")["detail"] == OUTSIDE
        )
    assert not Account.objects.filter(email="ceo@bigcorp.test").exists()
    ok(ApiClient().call("/auth/register", {"email": "ceo@bigcorp.test", "password": "pw-1234567!"}))


def test_an_invited_membership_in_a_verified_domain_is_made_active_by_the_directory(
    scim, workspace, admin, other_scim, other_workspace
):
    """The directory vouches for its own domain: an invitation sent to one of its people is accepted on
    its word (and the account is reclaimed if it was never verified)."""
    account = AccountFactory(email="ivy@acme.test", verified=False)
    CredentialFactory(account=account)
    invited = invite(admin, account)
    unseen(scim, account)  # an invitation is the account's to accept: no User yet
    user = create_user(scim, "ivy@acme.test", externalId="okta-ivy")
    assert user["id"] == str(account.pk) and user["active"] is True
    membership = Membership.objects.get(pk=invited["id"])
    assert membership.status == "active" and membership.accepted_at is not None
    entry = AuditEntry.objects.get(action="membership.update", resource_id=membership.pk)
    assert entry.actor_kind == "scim" and entry.changes["status"] == {"before": "invited", "after": "active"}
    account.refresh_from_db()
    assert account.verified and not account.has_usable_password()
    scim_err(other_scim.get(f"/Users/{account.pk}"), 404)
    assert not Membership.objects.filter(workspace=other_workspace, account=account).exists()


def test_an_operator_is_never_linked_or_created(scim, workspace, operator):
    operator.email = "root@acme.test"
    operator.save(update_fields=["email"])
    body = scim_err(scim.post("/Users", user_body("root@acme.test")), 409, "uniqueness")
    assert body["detail"] == "userName already exists"
    assert not Membership.objects.filter(account=operator).exists()
    assert not ScimUser.objects.filter(account=operator).exists()
    operator.refresh_from_db()
    assert operator.is_superuser and operator.email == "root@acme.test"


def test_an_operator_who_is_a_member_is_never_seen_or_changed(scim, workspace, operator, other_scim):
    operator.email = "root@acme.test"
    operator.save(update_fields=["email"])
    role = RoleFactory(workspace=workspace, name="admins")
    membership = MembershipFactory(account=operator, workspace=workspace, roles=[role])
    unseen(scim, operator)
    scim_err(scim.post("/Users", user_body("root@acme.test")), 409, "uniqueness")
    assert scim_ok(scim.get(f"/Groups/{role.pk}"))["members"] == []
    scim_ok(scim.put(f"/Groups/{role.pk}", {"displayName": "admins", "members": []}))
    scim_ok(scim.patch(f"/Groups/{role.pk}", [{"op": "remove", "path": "members"}]))
    scim_ok(scim.delete(f"/Groups/{role.pk}"), 204)  # the role goes; the operator's membership stays
    membership.refresh_from_db()
    assert membership.status == "active"
    unseen(other_scim, operator)


# Whom the directory sees


def test_an_invitation_to_an_account_outside_the_domains_is_invisible_and_never_activated(
    scim, workspace, admin, other_scim
):
    victim = AccountFactory(email="victim@elsewhere.test", name="Victim Name")
    CredentialFactory(account=victim)
    invited = invite(admin, victim)
    unseen(scim, victim)
    assert "Victim Name" not in scim.get("/Users").content.decode()
    membership = Membership.objects.get(pk=invited["id"])
    assert (membership.status, membership.accepted_at) == ("invited", None)
    err(client_for(victim, workspace).call("/projects/list"), 403, "not a member of this workspace")
    unseen(other_scim, victim)


def test_a_member_outside_the_domains_is_invisible(scim, workspace, other_scim):
    """Joined by its own consent (an accepted invitation), but the directory does not vouch for it."""
    account = AccountFactory(email="pat@elsewhere.test")
    membership = MembershipFactory(account=account, workspace=workspace)
    unseen(scim, account)
    membership.refresh_from_db()
    assert membership.status == "active"
    unseen(other_scim, account)


def test_a_member_in_a_verified_domain_is_a_user(scim, workspace, other_scim):
    account = AccountFactory(email="dee@acme.test")
    MembershipFactory(account=account, workspace=workspace)
    assert scim_ok(scim.get(f"/Users/{account.pk}"))["userName"] == "dee@acme.test"
    scim_err(other_scim.get(f"/Users/{account.pk}"), 404)


def test_an_account_the_directory_created_stays_its_own_when_the_domain_goes(scim, workspace, other_scim):
    created = create_user(scim, "made@acme.test")
    linked_account = AccountFactory(email="linked@acme.test", verified=True)
    MembershipFactory(account=linked_account, workspace=workspace)
    SsoDomain.objects.filter(workspace=workspace, domain="acme.test").delete()
    assert scim_ok(scim.get(f"/Users/{created['id']}"))["id"] == created["id"]
    assert scim_ok(scim.get("/Users"))["totalResults"] == 1
    unseen(scim, linked_account)
    # Deprovisioned, then invited again by the workspace and accepted: still the directory's.
    scim_ok(scim.delete(f"/Users/{created['id']}"), 204)
    MembershipFactory(account_id=created["id"], workspace=workspace)
    assert scim_ok(scim.get(f"/Users/{created['id']}"))["active"] is True
    scim_err(other_scim.get(f"/Users/{created['id']}"), 404)


def test_a_suspended_invitation_in_a_verified_domain_is_activated_on_the_directory_s_word(
    scim, workspace, other_scim
):
    """A tenant may suspend an invitation before it is accepted; within its own domain the directory's
    `active: true` is the consent (outside it, the membership is never seen: above)."""
    account = AccountFactory(email="sue@acme.test")
    membership = MembershipFactory(account=account, workspace=workspace, status="suspended", accepted_at=None)
    patched = scim_ok(
        scim.patch(f"/Users/{account.pk}", [{"op": "replace", "path": "active", "value": True}])
    )
    assert patched["active"] is True
    membership.refresh_from_db()
    assert membership.status == "active" and membership.accepted_at is not None
    scim_err(
        other_scim.patch(f"/Users/{account.pk}", [{"op": "replace", "path": "active", "value": False}]), 404
    )


@pytest.mark.parametrize("email", ["victim@elsewhere.test", "victim@other.test"])
def test_a_suspended_invitation_outside_the_domains_is_never_activated(scim, workspace, email, other_scim):
    account = AccountFactory(email=email)
    membership = MembershipFactory(account=account, workspace=workspace, status="suspended", accepted_at=None)
    unseen(scim, account)
    membership.refresh_from_db()
    assert (membership.status, membership.accepted_at) == ("suspended", None)
